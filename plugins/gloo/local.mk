# The Gloo communicator (C++; every exception stays inside the plugin).
if HAVE_GLOO
pkglib_LTLIBRARIES += plugins/gloo/gloo.la
plugins_gloo_gloo_la_SOURCES = plugins/gloo/gloo.cc plugins/gloo/choose.c plugins/gloo/choose.h
plugins_gloo_gloo_la_CXXFLAGS = $(KS_CXXFLAGS) $(GLOO_CFLAGS)
plugins_gloo_gloo_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_gloo_gloo_la_LIBADD = $(KS_PLUGIN_LIBADD) $(GLOO_LIBS)
endif
EXTRA_DIST += plugins/gloo/gloo.cc plugins/gloo/choose.c plugins/gloo/choose.h
