# KS_CHECK_MPI: MPI, through the mpicc wrapper, for bench/allreduce-mpi (the Open MPI
# allreduce the shared-memory and Gloo plugins are measured against; no plugin uses it).
# --with-mpi[=DIR] / --without-mpi; auto-detected on PATH (or DIR/bin) by default.
AC_DEFUN([KS_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@], [look for MPI (default: auto)])],
    [], [with_mpi=auto])
  ks_have_mpi=no
  ks_mpi_summary="no: disabled by --without-mpi"
  AS_IF([test "x$with_mpi" != xno], [
    AS_CASE([$with_mpi], [yes|auto], [ks_mpi_path=$PATH], [ks_mpi_path=$with_mpi/bin])
    AC_PATH_PROG([MPICC], [mpicc], [], [$ks_mpi_path])
    AS_IF([test -n "$MPICC"], [
      MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null || $MPICC -compile_info 2>/dev/null | cut -d' ' -f2-`
      MPI_LIBS=`$MPICC --showme:link 2>/dev/null || $MPICC -link_info 2>/dev/null | cut -d' ' -f2-`
      ks_save_CPPFLAGS=$CPPFLAGS; ks_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
      AC_MSG_CHECKING([whether MPI programs link])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[MPI_Init (0, 0);]])],
        [ks_have_mpi=yes], [])
      AC_MSG_RESULT([$ks_have_mpi])
      CPPFLAGS=$ks_save_CPPFLAGS; LIBS=$ks_save_LIBS])
    AS_IF([test $ks_have_mpi = yes],
      [ks_mpi_summary="yes ($MPICC)"],
      [ks_mpi_summary="no: MPI not found (apt-get install libopenmpi-dev)"
       MPI_CFLAGS=; MPI_LIBS=
       AS_IF([test "x$with_mpi" != xauto],
         [AC_MSG_ERROR([--with-mpi was given but no working mpicc was found. On Debian: apt-get install libopenmpi-dev])])])
  ])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AM_CONDITIONAL([HAVE_MPI], [test $ks_have_mpi = yes])
])
