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
  char *store_kind, *store_address, *token, *job, *base_job;
  char *store_dir; /* the file store's private directory, removed at the end */
  char **hosts;    /* each node's host, for the endpoint lists */
  KsStore *store;  /* the TCP store this launcher serves and/or uses */
  /* several nodes: the start (0, then each restart's number), whose keys and job name
   * are its own; the store and the nodes' hosts outlive a failed start when `keep` */
  int generation;
  gboolean keep;
  char **names; /* each node's host name (as `hostname` says), for messages */
} LaunchRendezvous;

gboolean ks_launch_rendezvous_begin (LaunchRendezvous *rv, KsRegistry *registry,
                                     const KsConfig *config, GError **error);
/* Node 0 of several waits up to wait_ms for the other nodes to finish first. With
 * rv->keep, a start of several nodes that failed ends but the store stays up (node 0's)
 * or open (the others'), for the restart's meeting: begin again with generation + 1. */
void ks_launch_rendezvous_end (LaunchRendezvous *rv, int wait_ms);

/* --max-restarts N: whether the job can be restarted (prints what is wrong and returns
 * FALSE: a usage error), and where restart number `restart` starts ("from checkpoint-40
 * in DIR"). */
gboolean ks_launch_restart_check (const KsConfig *config, gboolean program, int max_restarts);
char *ks_launch_restart_origin (const KsConfig *config, gboolean program, int restart);
/* Several nodes: "node K (host NAME, ADDRESS: ranks A-B)" for the node of job rank
 * `rank` of a collective job, or NULL when not known. */
char *ks_launch_node_of_rank (const LaunchRendezvous *rv, int rank);
/* Several nodes: the nodes a process's output line says the job lost ("node 1 (host ...:
 * ranks 2-3) was lost: rank 2, 3 did not reach allreduce #40"), or NULL. */
char *ks_launch_lost_nodes (const LaunchRendezvous *rv, const char *line);

#endif
