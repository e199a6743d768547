/* The core's store and communicator handles, shared by comm.c and comm-hier.c. */
#ifndef KS_COMM_PRIVATE_H
#define KS_COMM_PRIVATE_H

#include "ks-private.h"

/* the library's insides: not exported (libksdist.so exports the public API only) */
#pragma GCC visibility push(hidden)

struct KsStore {
  KsInstance instance;
};

struct KsComm {
  KsInstance instance;
  KsStore *store;
  int timeout_ms;
  guint64 seq;   /* collectives started, the same count on every rank */
  char *group;   /* "" for the world, else "g<parent group>/<ranks>" */
  int *world;    /* this group's members in the world's numbering */
  int n_world;
  gboolean shared_instance; /* a sub-group or the core's own: no settings of its own */
};

#define STORE_OPS(s) KS_INSTANCE_OPS (&(s)->instance, KsStoreOps)
#define COMM_OPS(c) KS_INSTANCE_OPS (&(c)->instance, KsCommOps)
#define CTX(x) ((x)->instance.ctx)

#pragma GCC visibility pop

#endif
