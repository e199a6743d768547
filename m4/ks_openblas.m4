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
    AS_IF([test $ks_have_openblas = yes], [ks_openblas_summary=yes],
      [ks_openblas_summary="no: OpenBLAS not found (apt-get install libopenblas-dev)"
       AS_IF([test "x$with_openblas" != xauto],
         [AC_MSG_ERROR([--with-openblas was given but OpenBLAS was not found. On Debian: apt-get install libopenblas-dev])])])
  ])
  AC_SUBST([OPENBLAS_CFLAGS])
  AC_SUBST([OPENBLAS_LIBS])
  AM_CONDITIONAL([HAVE_OPENBLAS], [test $ks_have_openblas = yes])
])
