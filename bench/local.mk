# Benchmarks: not tests (timings on shared machines are noisy); `make bench` runs them.
if HAVE_OPENBLAS
EXTRA_PROGRAMS = bench/bench-sgemm bench/bench-mlp
bench_bench_mlp_SOURCES = bench/bench-mlp.c
bench_bench_mlp_LDADD = libksdist.la $(GLIB_LIBS)
bench_bench_sgemm_SOURCES = bench/bench-sgemm.c
bench_bench_sgemm_CFLAGS = $(AM_CFLAGS) $(OPENBLAS_CFLAGS)
bench_bench_sgemm_LDADD = libksdist.la $(GLIB_LIBS) $(OPENBLAS_LIBS)
CLEANFILES += bench/bench-sgemm bench/bench-mlp
EXTRA_DIST += bench/bench-mlp-torch.py bench/run-mlp.sh

bench: bench/bench-sgemm bench/bench-mlp
	KS_PLUGIN_PATH=$(abs_top_builddir)/plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= \
		bench/bench-sgemm 1
	KS_PLUGIN_PATH=$(abs_top_builddir)/plugins/openblas/.libs KS_PLUGIN_SYSTEM_PATH= \
		bench/bench-sgemm
	$(SHELL) $(srcdir)/bench/run-mlp.sh
.PHONY: bench
endif
