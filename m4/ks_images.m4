# KS_CHECK_IMAGES: gdk-pixbuf (the tasks library's image folders, `ksdist datagen
# images`) and FreeType with fontconfig (`ksdist datagen glyphs`). Auto-detected through
# pkg-config; the core and the plugins never need them, and without them only what
# reads or writes images is left out, as configure's summary says.
AC_DEFUN([KS_CHECK_IMAGES], [
  PKG_CHECK_MODULES([PIXBUF], [gdk-pixbuf-2.0 >= 2.40], [ks_have_pixbuf=yes], [ks_have_pixbuf=no])
  AS_IF([test $ks_have_pixbuf = yes],
    [ks_pixbuf_summary="yes (`$PKG_CONFIG --modversion gdk-pixbuf-2.0`)"
     AC_DEFINE([HAVE_PIXBUF], [1], [Define to 1 to read and write images with gdk-pixbuf])],
    [ks_pixbuf_summary="no: gdk-pixbuf 2.40 not found (apt-get install libgdk-pixbuf-2.0-dev); image folders and datagen images left out"])
  ks_have_glyphs=no
  ks_glyphs_summary="no: needs gdk-pixbuf"
  AS_IF([test $ks_have_pixbuf = yes], [
    PKG_CHECK_MODULES([GLYPHS], [freetype2 fontconfig], [ks_have_glyphs=yes], [ks_have_glyphs=no])
    AS_IF([test $ks_have_glyphs = yes],
      [ks_glyphs_summary="yes (FreeType `$PKG_CONFIG --modversion freetype2`, fontconfig `$PKG_CONFIG --modversion fontconfig`)"
       AC_DEFINE([HAVE_GLYPHS], [1], [Define to 1 to draw glyph data sets with FreeType and fontconfig])],
      [ks_glyphs_summary="no: FreeType or fontconfig not found (apt-get install libfreetype-dev libfontconfig-dev); datagen glyphs left out"])
  ])
  AM_CONDITIONAL([HAVE_PIXBUF], [test $ks_have_pixbuf = yes])
  AM_CONDITIONAL([HAVE_GLYPHS], [test $ks_have_glyphs = yes])
])
