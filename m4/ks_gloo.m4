# KS_CHECK_GLOO: the Gloo communicator's dependency. Debian's libgloo-dev has no
# pkg-config file and is C++: check its headers and link a program by hand.
# --with-gloo[=DIR] / --without-gloo; auto-detected by default.
AC_DEFUN([KS_CHECK_GLOO], [
  AC_ARG_WITH([gloo],
    [AS_HELP_STRING([--with-gloo@<:@=DIR@:>@], [look for Gloo (default: auto)])],
    [], [with_gloo=auto])
  ks_have_gloo=no
  ks_gloo_summary="no: disabled by --without-gloo"
  AS_IF([test "x$with_gloo" != xno], [
    AS_CASE([$with_gloo],
      [yes|auto], [GLOO_CFLAGS=; GLOO_LIBS=-lgloo],
      [AS_IF([test -d "$with_gloo/include/gloo"], [],
         [AC_MSG_ERROR([--with-gloo=$with_gloo: $with_gloo/include/gloo does not exist])])
       GLOO_CFLAGS="-I$with_gloo/include"
       GLOO_LIBS="-L$with_gloo/lib -Wl,-rpath,$with_gloo/lib -lgloo"])
    AC_LANG_PUSH([C++])
    ks_save_CPPFLAGS=$CPPFLAGS; ks_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $GLOO_CFLAGS"; LIBS="$GLOO_LIBS $LIBS"
    AC_CHECK_HEADER([gloo/transport/tcp/device.h], [
      AC_MSG_CHECKING([for gloo::transport::tcp::CreateDevice in -lgloo])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gloo/transport/tcp/device.h>]],
          [[gloo::transport::tcp::attr a; a.hostname = "127.0.0.1"; (void) gloo::transport::tcp::CreateDevice (a);]])],
        [ks_have_gloo=yes], [])
      AC_MSG_RESULT([$ks_have_gloo])])
    CPPFLAGS=$ks_save_CPPFLAGS; LIBS=$ks_save_LIBS
    AC_LANG_POP([C++])
    AS_IF([test $ks_have_gloo = yes],
      [ks_gloo_summary=yes],
      [ks_gloo_summary="no: Gloo not found (apt-get install libgloo-dev)"
       GLOO_CFLAGS=; GLOO_LIBS=
       AS_IF([test "x$with_gloo" != xauto],
         [AC_MSG_ERROR([--with-gloo was given but Gloo was not found. On Debian: apt-get install libgloo-dev])])])
  ])
  AC_SUBST([GLOO_CFLAGS])
  AC_SUBST([GLOO_LIBS])
  AM_CONDITIONAL([HAVE_GLOO], [test $ks_have_gloo = yes])
])
