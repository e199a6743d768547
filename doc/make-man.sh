#!/bin/sh
# Writes ksdist(1) on standard output from what the program itself prints: the command
# list of `ksdist --help`, each command's options (`ksdist help COMMAND`) and the core's
# settings (`ksdist config --reference`), so the man page cannot drift from the program.
# The build runs it (Makefile.am); usage: doc/make-man.sh KSDIST
set -eu
ksdist=${1:?usage: doc/make-man.sh KSDIST}
export LC_ALL=C.UTF-8 # GLib's help text is UTF-8 ("[OPTION…]"), whatever the builder's locale
version=$("$ksdist" --version | sed -n 's/^ksdist \([^ ]*\).*/\1/p')

# roff: a backslash is \e, a line must not start with . or ', a hyphen in an option is \-
roff () { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

cat <<EOF
.TH KSDIST 1 "" "ksdist $version" "User Commands"
.SH NAME
ksdist \\- distributed neural-network training
.SH SYNOPSIS
.B ksdist
.I COMMAND
.RI [ OPTIONS ...]
.br
.B ksdist help
.I COMMAND
.SH DESCRIPTION
.B ksdist
trains neural networks in one process, or in many on one machine or several: data
parallel, pipeline parallel, parameter servers with dense and sparse tables, and
few-shot meta-learning. A configuration file (INI groups such as
.BR [model] ", " [data] ", " [train] ", " [optim] )
says what to train and how; plugins loaded at run time provide the compute backends,
transports and distributed algorithms. This page is generated from the program's own
help and settings.
.SH COMMANDS
EOF

# each command of `ksdist --help` with the options `ksdist help COMMAND` lists
"$ksdist" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' |
while read -r command; do
  [ "$command" != help ] || continue
  "$ksdist" help "$command" | roff | awk '
    /^Usage:/ { usage = 1; next }
    usage && NF { sub (/^ +/, ""); printf ".SS \"%s\"\n", $0; usage = 0; summary = 1; next }
    summary && NF && !/Options:$/ { print; next }
    /^Help Options:/ { summary = 0; options = 0; next }
    /^Application Options:/ { summary = 0; options = 1; next }
    options && NF {
      sub (/^ +/, "")
      split ($0, part, /  +/)
      text = substr ($0, length (part[1]) + 1); sub (/^ +/, "", text)
      gsub (/-/, "\\-", part[1])
      printf ".TP\n.B \"%s\"\n%s\n", part[1], text
      next
    }
    !NF { options = 0 }'
done

cat <<'EOF'
.SH CONFIGURATION
The groups and keys of the core and of the tasks library, with each key's default and allowed values. A value resolves
as default < file < environment
.B KS_GROUP_KEY
<
.BR "\-\-set group.key=value" .
The plugins' groups (e.g.
.BR [openblas] ", " [gloo] ", " [pslib] )
are listed by
.B "ksdist config \-\-reference"
with the plugins this machine has.
EOF
"$ksdist" config --reference | roff | awk -F ' [|] ' '
  /^## / { part = ($0 !~ /plugins/); core = 0; next }
  /^### / { core = part && ($0 !~ /\(plugin\)/); if (core) { sub (/^### /, ""); printf ".SS \"%s\"\n", $0 }; next }
  core && /^\| `/ {
    key = $1; sub (/^\| /, "", key); gsub (/`/, "", key)
    default = $2; gsub (/`/, "", default)
    meaning = $4; sub (/ \|$/, "", meaning); gsub (/`/, "", meaning)
    printf ".TP\n.B %s\n(default %s; %s) %s\n", key, default == "" ? "empty" : default, $3, meaning
  }'

cat <<'EOF'
.SH ENVIRONMENT
.TP
.B KS_PLUGIN_PATH
Colon-separated folders or plugin files searched first.
.TP
.B KS_PLUGINS
Plugins to load (a comma list such as
.BR gloo,openblas ),
or to skip after a leading
.BR ^ .
.TP
.B KS_GROUP_KEY
Any setting, e.g.
.B KS_TRAIN_STEPS=600
for
.BR "[train] steps" ;
.B \-\-set
wins over the environment, which wins over the file.
A variable whose group is known and whose key is not (a typo such as
.BR KS_TRAIN_STPES )
is an error.
.TP
.B KS_STORE_TOKEN
The secret every process of a job over a TCP store shares; parameter servers refuse to
start without it.
.B "ksdist launch"
sets a random one when none is set.
.SH FILES
.TP
.I PREFIX/lib/ksdist
The installed plugins.
.TP
.I PREFIX/share/ksdist/examples
Example configurations, e.g.
.BR "ksdist train PREFIX/share/ksdist/examples/default.ini" .
.TP
.I PREFIX/share/doc/ksdist/config.md
Every setting of the core and of the plugins, as
.B "ksdist config \-\-reference"
prints it.
.SH EXIT STATUS
0 on success, 1 when training or a process failed, 2 for a usage or configuration
error, 3 from
.B train
when another process of its job failed first (it ended, or did not answer in time), 143
or 130 after SIGTERM or Ctrl-C (a checkpoint saved at the step the workers agreed on).
.SH SEE ALSO
The README of the source distribution (installed in
.IR PREFIX/share/doc/ksdist ).
EOF
