#!/bin/sh
# Ranks started by Open MPI's mpirun (its environment made by hand: mpirun need not be
# installed) with every rank on this host meet through a private file store and take
# shared memory with [comm] backend = auto, as under ksdist launch and torchrun. TAP
# output. Needs KSDIST and KS_SRCDIR (tests/local.mk).
set -u
unset KS_PLUGIN_SYSTEM_PATH KS_PLUGIN_PATH
dir=$(mktemp -d "${TMPDIR:-/tmp}/ksdist-mpi-env-XXXXXX")
trap 'rm -rf "$dir" "${TMPDIR:-/tmp}/ksdist-mpirun-ksdist-test-$$"*' EXIT
echo "1..2"
n=0
for backend in auto gloo; do
  n=$((n + 1))
  for r in 0 1; do
    OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=$r \
    OMPI_COMM_WORLD_LOCAL_SIZE=2 PMIX_NAMESPACE="ksdist-test-$$-$backend" \
      timeout 120 "$KSDIST" train "$KS_SRCDIR/examples/default.ini" --set train.steps=5 \
      --set optim.warmup=0 --set comm.backend=$backend >"$dir/$backend-$r.log" 2>&1 &
  done
  wait
  case $backend in
    auto) want="(collective mode, shm by auto: every rank on this host)" ;;
    *) want="(collective mode, gloo by [comm] backend)" ;;
  esac
  if grep -qF "worker 0 of 2 $want" "$dir/$backend-0.log" \
     && grep -qF "worker 1 of 2 $want" "$dir/$backend-1.log" \
     && grep -q '^eval accuracy' "$dir/$backend-0.log" && grep -q '^eval accuracy' "$dir/$backend-1.log"; then
    echo "ok $n - [comm] backend = $backend under mpirun's environment: $want"
  else
    echo "not ok $n - [comm] backend = $backend under mpirun's environment: want '$want' from both ranks"
    sed 's/^/# /' "$dir/$backend-0.log" "$dir/$backend-1.log" | head -30
  fi
done
