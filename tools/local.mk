# The ksdist command.
bin_PROGRAMS += tools/ksdist
tools_ksdist_SOURCES = \
	tools/cli.h \
	tools/cli.c \
	tools/main.c \
	tools/cmd-plugins.c \
	tools/cmd-config.c \
	tools/train.h \
	tools/cmd-train.c \
	tools/cmd-segment.c \
	tools/launch.h \
	tools/launch-rendezvous.c \
	tools/launch-layout.c \
	tools/launch-endpoints.c \
	tools/launch-restart.c \
	tools/launch-watch.c \
	tools/launch-job.h \
	tools/cmd-launch.c \
	tools/cmd-generate.c \
	tools/cmd-infer.c \
	tools/infer-read.c \
	tools/infer.h \
	tools/cmd-export.c \
	tools/datagen.h \
	tools/cmd-datagen.c \
	tools/datagen-tokens.c \
	tools/cmd-plot.c \
	tools/plot-trace.c \
	tools/plot-write.c \
	tools/cmd-bench.c \
	tools/bench-pipeline.c
tools_ksdist_CFLAGS = $(AM_CFLAGS) $(JSON_CFLAGS) $(RSVG_CFLAGS) $(PIXBUF_CFLAGS) $(GLYPHS_CFLAGS)
tools_ksdist_LDADD = libksdist-tasks.la libksdist.la $(GLIB_LIBS) $(JSON_LIBS) $(RSVG_LIBS) $(PIXBUF_LIBS) $(GLYPHS_LIBS) -lm
if HAVE_PIXBUF
tools_ksdist_SOURCES += tools/datagen-images.c
endif
if HAVE_GLYPHS
tools_ksdist_SOURCES += tools/datagen-fonts.h tools/datagen-glyphs.c tools/datagen-digits.c
endif

# A cluster of network namespaces on one machine, for multi-host jobs on a laptop
# (README "Several machines"); installed beside the examples, not on PATH.
clustertooldir = $(pkgdatadir)/tools
dist_clustertool_SCRIPTS = tools/cluster.sh
