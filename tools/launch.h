/* ksdist launch's rendezvous: the store a launched job's processes meet at, and for a
 * job on several nodes, the meeting of the nodes' launchers. */
#ifndef KS_LAUNCH_H
#define KS_LAUNCH_H

#include "cli.h"

typedef struct {
  /* given */
  int nnodes, node_rank, nproc;
  const char *master; /* HOST:PORT of node 0's store (several nodes) */
  /* a parameter-server job: this node's workers and servers (nproc is their sum) */
  gboolean ps;
  int workers, servers;
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
  /* several nodes: each node's workers and servers (a collective job: nproc and 0) and,
   * in a parameter-server job, its servers' ports ("41200,41201"; launch-layout.c) */
  int *node_workers, *node_servers;
  char **node_ports;
  /* fleetrun's endpoint lists (launch-endpoints.c): this node's IP and its servers'
   * ports as given ("6170,6171"), or NULL to find the address and choose free ports */
  const char *own_host, *own_ports;
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
 * `rank` (a parameter-server job's workers first, then its servers; there the node's
 * roles: "workers 0-1, server 0"), or NULL when not known. */
char *ks_launch_node_of_rank (const LaunchRendezvous *rv, int rank);
/* Several nodes: the nodes a process's output line says the job lost ("node 1 (host ...:
 * ranks 2-3) was lost: rank 2, 3 did not reach allreduce #40"), or NULL. */
char *ks_launch_lost_nodes (const LaunchRendezvous *rv, const char *line);

/* The layout of a job on several nodes (launch-layout.c). A parameter-server node says
 * "W S PORTS" after its process count, host and name at the meeting: its workers,
 * servers and their ports (a comma list, "-" for none), chosen free on its host. */
/* A TCP port free on `host` now (the kernel's choice), or 0; the probing socket is added
 * to `held`, which keeps the port from being chosen twice until it is freed. */
int ks_launch_free_port (const char *host, GPtrArray *held);
char *ks_launch_layout_mine (const LaunchRendezvous *rv, GError **error);
/* Takes node k's word (`fields`: the words after its host name, none for a collective
 * node), or says what disagrees with this node. */
gboolean ks_launch_layout_take (LaunchRendezvous *rv, int k, char **fields, GError **error);
/* After every node's word: the job's workers and servers (at least one of each). */
gboolean ks_launch_layout_check (const LaunchRendezvous *rv, GError **error);
/* Job totals, the job rank of this node's i-th process (its workers, then its servers),
 * and every server's HOST:PORT in order, comma-separated. */
int ks_launch_layout_total (const LaunchRendezvous *rv, gboolean servers);
int ks_launch_layout_rank (const LaunchRendezvous *rv, int i);
char *ks_launch_layout_servers (const LaunchRendezvous *rv);
/* Node k's "node K (host NAME, ADDRESS: ...)" and the node of job rank `rank`, or -1. */
char *ks_launch_layout_node (const LaunchRendezvous *rv, int k);
int ks_launch_layout_node_of (const LaunchRendezvous *rv, int rank);
/* "servers at HOST:PORT,...; node 0 (...: workers 0-1), node 1 (...: server 0)" */
char *ks_launch_layout_describe (const LaunchRendezvous *rv);
void ks_launch_layout_clear (LaunchRendezvous *rv);

/* fleetrun's form, `--servers IP:PORT,... --workers IP:PORT,...` (launch-endpoints.c):
 * the nodes (one per IP), this one's place, servers and workers, and node 0's store. */
typedef struct {
  int nnodes, node_rank; /* in: --nnodes (1 when not given), --node-rank (-1 when not) */
  char *master;          /* in: --master or NULL; out: node 0's IP:29500 when it was NULL */
  char *host, *ports;    /* out: this node's IP and its servers' ports ("6170,6171") */
  int servers, workers;  /* out: this node's */
} LaunchEndpoints;
gboolean ks_launch_endpoints (LaunchEndpoints *e, const char *servers, const char *workers,
                              GError **error);

#endif
