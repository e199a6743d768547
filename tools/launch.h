/* ksdist launch's rendezvous: the store a launched job's processes meet at, and for a
 * job on several nodes, the meeting of the nodes' launchers. */
#ifndef KS_LAUNCH_H
#define KS_LAUNCH_H

#include "cli.h"

typedef struct {
  /* given */
  int nnodes, node_rank, nproc;
  const char *master; /* HOST:PORT of node 0's store (several nodes) */
  /* made by begin */
  char *store_kind, *store_address, *token, *job;
  char *store_dir; /* the file store's private directory, removed at the end */
  char **hosts;    /* each node's host, for the endpoint lists */
  KsStore *store;  /* the TCP store this launcher serves and/or uses */
} LaunchRendezvous;

gboolean ks_launch_rendezvous_begin (LaunchRendezvous *rv, KsRegistry *registry,
                                     const KsConfig *config, GError **error);
/* Node 0 of several waits up to wait_ms for the other nodes to finish first. */
void ks_launch_rendezvous_end (LaunchRendezvous *rv, int wait_ms);

/* --max-restarts N: whether the job can be restarted (prints what is wrong and returns
 * FALSE: a usage error), and where restart number `restart` starts ("from checkpoint-40
 * in DIR"). */
gboolean ks_launch_restart_check (const KsConfig *config, gboolean program, int nnodes,
                                  int max_restarts);
char *ks_launch_restart_origin (const KsConfig *config, gboolean program, int restart);

#endif
