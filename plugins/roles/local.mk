# Role makers: paddlecloud, env (mpirun/srun/torchrun), user.
pkglib_LTLIBRARIES += plugins/roles/roles.la
plugins_roles_roles_la_SOURCES = plugins/roles/roles.c libksdist/comm/slurm.h libksdist/comm/slurm.c
plugins_roles_roles_la_LDFLAGS = $(KS_PLUGIN_LDFLAGS)
plugins_roles_roles_la_LIBADD = $(KS_PLUGIN_LIBADD)
plugins_roles_roles_la_CPPFLAGS = $(AM_CPPFLAGS)
