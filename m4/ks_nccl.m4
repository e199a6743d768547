# KS_CHECK_NCCL: the NCCL communicator's dependency; needs CUDA.
# --with-nccl[=DIR] / --without-nccl; auto-detected beside CUDA by default.
AC_DEFUN([KS_CHECK_NCCL], [
  AC_REQUIRE([KS_CHECK_CUDA])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [look for NCCL (default: auto, beside CUDA)])],
    [], [with_nccl=auto])
  ks_have_nccl=no
  ks_nccl_summary="no: disabled by --without-nccl"
  AS_IF([test "x$with_nccl" != xno], [
    AS_IF([test $ks_have_cuda != yes],
      [ks_nccl_summary="no: needs CUDA, which was not found"],
      [AS_CASE([$with_nccl], [yes|auto], [ks_nccl_home=$CUDA_HOME], [ks_nccl_home=$with_nccl])
       ks_nccl_libdir=$ks_nccl_home/lib64
       AS_IF([test -d "$ks_nccl_libdir"], [], [ks_nccl_libdir=$ks_nccl_home/lib])
       NCCL_CFLAGS="-I$ks_nccl_home/include $CUDA_CFLAGS"
       NCCL_LIBS="-L$ks_nccl_libdir -Wl,-rpath,$ks_nccl_libdir -lnccl $CUDA_LIBS"
       ks_save_CPPFLAGS=$CPPFLAGS; ks_save_LIBS=$LIBS
       CPPFLAGS="$CPPFLAGS $NCCL_CFLAGS"; LIBS="$NCCL_LIBS $LIBS"
       AC_CHECK_HEADER([nccl.h], [
         dnl non-blocking init and ncclCommGetAsyncError: NCCL 2.14 or later
         AC_MSG_CHECKING([for ncclCommInitRankConfig])
         AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]],
             [[ncclComm_t c; ncclUniqueId id; ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
               ncclResult_t r; ncclGetUniqueId (&id);
               ncclCommInitRankConfig (&c, 1, id, 0, &config); ncclCommGetAsyncError (c, &r);]])],
           [ks_have_nccl=yes], [])
         AC_MSG_RESULT([$ks_have_nccl])])
       CPPFLAGS=$ks_save_CPPFLAGS; LIBS=$ks_save_LIBS
       AS_IF([test $ks_have_nccl = yes],
         [ks_nccl_summary="yes ($ks_nccl_home)"],
         [ks_nccl_summary="no: NCCL 2.14 or later not found under $ks_nccl_home (--with-nccl=DIR)"
          NCCL_CFLAGS=; NCCL_LIBS=])])
    AS_IF([test $ks_have_nccl = no && test "x$with_nccl" != xauto],
      [AC_MSG_ERROR([--with-nccl was given but NCCL was not found: $ks_nccl_summary])])
  ])
  AC_SUBST([NCCL_CFLAGS])
  AC_SUBST([NCCL_LIBS])
  AM_CONDITIONAL([HAVE_NCCL], [test $ks_have_nccl = yes])
])
