# KS_CHECK_OPENBLAS: the CPU compute plugin's dependency.
# --with-openblas[=DIR] / --without-openblas; auto-detected by default, through
# pkg-config (Debian's libopenblas-dev) or DIR/include and DIR/lib.
AC_DEFUN([KS_CHECK_OPENBLAS], [
  AC_ARG_WITH([openblas],
    [AS_HELP_STRING([--with-openblas@<:@=DIR@:>@], [build the OpenBLAS compute plugin (default: auto)])],
    [], [with_openblas=auto])
  ks_have_openblas=no
  ks_openblas_summary="no: disabled by --without-openblas"
  AS_IF([test "x$with_openblas" != xno], [
    AS_CASE([$with_openblas],
      [yes|auto], [PKG_CHECK_MODULES([OPENBLAS], [openblas], [ks_have_openblas=yes], [:])],
      [AS_IF([test -f "$with_openblas/include/cblas.h"], [],
         [AC_MSG_ERROR([--with-openblas=$with_openblas: $with_openblas/include/cblas.h does not exist])])
       OPENBLAS_CFLAGS="-I$with_openblas/include"
       OPENBLAS_LIBS="-L$with_openblas/lib -Wl,-rpath,$with_openblas/lib -lopenblas"])
    AS_IF([test $ks_have_openblas = no], [
      ks_save_CPPFLAGS=$CPPFLAGS; ks_save_LIBS=$LIBS
      AS_IF([test -z "$OPENBLAS_LIBS"], [OPENBLAS_LIBS=-lopenblas])
      CPPFLAGS="$CPPFLAGS $OPENBLAS_CFLAGS"; LIBS="$OPENBLAS_LIBS $LIBS"
      AC_CHECK_HEADER([cblas.h],
        [AC_MSG_CHECKING([for openblas_set_num_threads])
         AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]], [[openblas_set_num_threads (1);]])],
           [ks_have_openblas=yes], [])
         AC_MSG_RESULT([$ks_have_openblas])])
      CPPFLAGS=$ks_save_CPPFLAGS; LIBS=$ks_save_LIBS])
    dnl Debian ships OpenBLAS built on pthreads (the default) and on OpenMP, side by
    dnl side. ksdist's kernels share OpenMP's thread pool with the OpenMP build; with
    dnl pthreads they stay single-threaded, as two pools would fight over the cores.
    ks_openblas_openmp=no
    AS_IF([test $ks_have_openblas = yes], [
      AC_LANG_PUSH([C])
      AC_OPENMP
      AC_LANG_POP([C])])
    AS_IF([test $ks_have_openblas = yes && test -n "$PKG_CONFIG" && test "x$enable_openmp" != xno \
           && test "x$ac_cv_prog_c_openmp" != xunsupported],
      [AS_CASE([$with_openblas], [yes|auto], [ks_try_openmp=yes], [ks_try_openmp=no])],
      [ks_try_openmp=no])
    AS_IF([test $ks_try_openmp = yes], [
      ks_pc_dir=`$PKG_CONFIG --variable=libdir openblas 2>/dev/null`
      ks_omp_dir=`echo "$ks_pc_dir" | sed 's,openblas-pthread/*$,openblas-openmp,'`
      dnl an rpath also when pkg-config names the OpenMP build already: at run time the
      dnl soname libopenblas.so.0 finds whichever build update-alternatives chose for it
      dnl (the pthread one by default), not the one linked against
      AS_IF([test -f "$ks_omp_dir/libopenblas.so"],
        [OPENBLAS_LIBS="-L$ks_omp_dir -Wl,-rpath,$ks_omp_dir -lopenblas"
         ks_omp_include=`echo "$OPENBLAS_CFLAGS" | sed 's,openblas-pthread,openblas-openmp,g'`
         AS_IF([test -f "`echo $ks_omp_include | sed 's,^-I,,;s, .*,,'`/cblas.h"],
           [OPENBLAS_CFLAGS=$ks_omp_include])])])
    AS_IF([test $ks_have_openblas = yes], [
      AC_MSG_CHECKING([whether OpenBLAS is the OpenMP build])
      ks_save_CPPFLAGS=$CPPFLAGS; ks_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $OPENBLAS_CFLAGS"; LIBS="$OPENBLAS_LIBS $LIBS"
      AC_RUN_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
          [[return openblas_get_parallel () == 2 ? 0 : 1;]])],
        [ks_openblas_openmp=yes], [], [ks_openblas_openmp=no])
      CPPFLAGS=$ks_save_CPPFLAGS; LIBS=$ks_save_LIBS
      AC_MSG_RESULT([$ks_openblas_openmp])
      AS_IF([test $ks_openblas_openmp = yes && test -n "$OPENMP_CFLAGS"],
        [OPENBLAS_CFLAGS="$OPENBLAS_CFLAGS $OPENMP_CFLAGS"
         OPENBLAS_LIBS="$OPENBLAS_LIBS $OPENMP_CFLAGS"],
        [ks_openblas_openmp=no])])
    AS_IF([test $ks_have_openblas = yes && test $ks_openblas_openmp = yes],
      [ks_openblas_summary="yes, OpenMP build: one thread pool with ksdist's kernels"],
      [test $ks_have_openblas = yes],
      [ks_openblas_summary="yes, without OpenMP's shared pool: ksdist's kernels single-threaded (libopenblas-openmp-dev and OpenMP give one pool)"])
    AS_IF([test $ks_have_openblas = yes], [:],
      [ks_openblas_summary="no: OpenBLAS not found (apt-get install libopenblas-dev)"
       AS_IF([test "x$with_openblas" != xauto],
         [AC_MSG_ERROR([--with-openblas was given but OpenBLAS was not found. On Debian: apt-get install libopenblas-dev])])])
  ])
  AC_SUBST([OPENBLAS_CFLAGS])
  AC_SUBST([OPENBLAS_LIBS])
  AM_CONDITIONAL([HAVE_OPENBLAS], [test $ks_have_openblas = yes])
])
