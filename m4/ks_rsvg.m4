# KS_CHECK_RSVG: librsvg (GNOME's SVG renderer, on cairo), for `ksdist plot -o FILE.png`:
# the plot's own SVG rendered to PNG. --with-rsvg / --without-rsvg; auto-detected through
# pkg-config by default; without it, plots are SVG only.
AC_DEFUN([KS_CHECK_RSVG], [
  AC_ARG_WITH([rsvg],
    [AS_HELP_STRING([--with-rsvg], [PNG plots through librsvg and cairo (default: auto)])],
    [], [with_rsvg=auto])
  ks_have_rsvg=no
  ks_rsvg_summary="no: disabled by --without-rsvg"
  AS_IF([test "x$with_rsvg" != xno], [
    PKG_CHECK_MODULES([RSVG], [librsvg-2.0 >= 2.52 cairo-png], [ks_have_rsvg=yes],
      [ks_have_rsvg=no])
    AS_IF([test $ks_have_rsvg = yes],
      [ks_rsvg_summary="yes (librsvg `$PKG_CONFIG --modversion librsvg-2.0`)"
       AC_DEFINE([HAVE_RSVG], [1], [Define to 1 to write PNG plots with librsvg])],
      [ks_rsvg_summary="no: librsvg 2.52 not found (apt-get install librsvg2-dev); plots are SVG only"
       AS_IF([test "x$with_rsvg" = xyes],
         [AC_MSG_ERROR([--with-rsvg was given but librsvg was not found. On Debian: apt-get install librsvg2-dev])])])
  ])
  AM_CONDITIONAL([HAVE_RSVG], [test $ks_have_rsvg = yes])
])
