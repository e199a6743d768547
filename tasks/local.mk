# tasks: the models, data readers and Reptile that `ksdist train` knows by name, in a
# library of their own beside the core (only it needs gdk-pixbuf).
lib_LTLIBRARIES += libksdist-tasks.la
libksdist_tasks_la_SOURCES = \
	tasks/tasks-private.h \
	tasks/gpt.c \
	tasks/data.c \
	tasks/images.c \
	tasks/reptile.c \
	tasks/ctr.c \
	tasks/builtin.c \
	tasks/net.h \
	tasks/net.c \
	tasks/held-out.c \
	tasks/net-config.c \
	tasks/samples.h \
	tasks/samples.c \
	tasks/samples-files.c \
	tasks/samples-task.c \
	tasks/tokens-task.c \
	tasks/ctr-task.c \
	tasks/meta-task.c \
	tasks/table-private.h \
	tasks/table.c \
	tasks/table-read.c \
	tasks/table-rows.c tasks/table-map.c \
	tasks/table-csv.c \
	tasks/table-npy.c \
	tasks/table-idx.c \
	tasks/table-images.c \
	tasks/table-tokens.c
libksdist_tasks_la_CFLAGS = $(AM_CFLAGS) $(PIXBUF_CFLAGS) $(ZLIB_CFLAGS)
libksdist_tasks_la_LIBADD = libksdist.la $(GLIB_LIBS) $(PIXBUF_LIBS) $(ZLIB_LIBS) -lm
libksdist_tasks_la_LDFLAGS = -no-undefined -version-info 0:0:0

ksdistinclude_HEADERS += \
	include/ksdist/tasks.h \
	include/ksdist/gpt.h \
	include/ksdist/data.h \
	include/ksdist/images.h \
	include/ksdist/meta.h \
	include/ksdist/ctr.h \
	include/ksdist/table.h
