# Optimizers over a model's parameter arena.
pkglib_LTLIBRARIES += plugins/optim/optim.la
plugins_optim_optim_la_SOURCES = plugins/optim/optim.c
plugins_optim_optim_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_optim_optim_la_LIBADD = $(KS_PLUGIN_LIBADD) -lm
