# KS_CHECK_ZMQ: ZeroMQ, the messaging engine of the parameter-server modes (as in ps-lite
# and BytePS). --with-zmq / --without-zmq; auto-detected through pkg-config by default.
AC_DEFUN([KS_CHECK_ZMQ], [
  AC_ARG_WITH([zmq],
    [AS_HELP_STRING([--with-zmq], [build the parameter-server plugin on ZeroMQ (default: auto)])],
    [], [with_zmq=auto])
  ks_have_zmq=no
  ks_zmq_summary="no: disabled by --without-zmq"
  AS_IF([test "x$with_zmq" != xno], [
    PKG_CHECK_MODULES([ZMQ], [libzmq >= 4.3], [ks_have_zmq=yes],
      [ks_have_zmq=no])
    AS_IF([test $ks_have_zmq = yes],
      [ks_zmq_summary="yes (libzmq `$PKG_CONFIG --modversion libzmq`)"],
      [ks_zmq_summary="no: libzmq 4.3 not found (apt-get install libzmq3-dev)"
       AS_IF([test "x$with_zmq" = xyes],
         [AC_MSG_ERROR([--with-zmq was given but libzmq was not found. On Debian: apt-get install libzmq3-dev])])])
  ])
  AM_CONDITIONAL([HAVE_ZMQ], [test $ks_have_zmq = yes])
])
