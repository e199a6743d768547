# Tests: GLib tests through automake's TAP driver; test plugins built only for them.
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
SH_LOG_DRIVER = $(LOG_DRIVER)
TEST_EXTENSIONS = .sh
AM_TESTS_ENVIRONMENT = \
	unset KS_PLUGIN_PATH KS_PLUGINS; \
	export KS_PLUGIN_SYSTEM_PATH=; \
	export KS_TEST_PLUGINS=$(abs_top_builddir)/tests/plugins/.libs; \
	export KS_BUILD_PLUGINS=$(abs_top_builddir)/plugins; \
	export KSDIST=$(abs_top_builddir)/tools/ksdist; \
	export KS_SRCDIR=$(abs_top_srcdir); \
	export G_DEBUG=fatal-criticals;
