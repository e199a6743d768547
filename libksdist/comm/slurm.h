/* Slurm's job step as srun describes it to each task (GLib only, so a test can build it
 * alone): the compressed node list, the tasks per node, the port of the job's store. */
#pragma once

#include <glib.h>

/* built into libksdist and the roles plugin: each keeps its own copy */
#pragma GCC visibility push(hidden)

/* "n[0-3],x1" -> {"n0","n1","n2","n3","x1"}; zero padding kept ("n[08-10]" -> n08 n09
 * n10), several ranges in a name ("r[1-2]n[1-2]"); NULL and *error naming `what` when
 * the list is malformed. */
char **ks_slurm_hostlist_expand (const char *list, const char *what, GError **error);

/* The tasks node `node` runs, from "2(x3),1" (SLURM_STEP_TASKS_PER_NODE's form); FALSE and
 * *error naming `what` when malformed or the node is not in it. */
gboolean ks_slurm_tasks_on_node (const char *spec, const char *what, int node, int *tasks,
                                 GError **error);

/* The ports of a job: its store's, from SLURM_JOB_ID, 15000 + 16 x its last three digits
 * (every task computes the same without talking, as Lightning's rule does), and the 15
 * after it for its parameter servers, so that jobs of consecutive ids never share one. */
#define KS_SLURM_PORTS_PER_JOB 16
gboolean ks_slurm_port (const char *job_id, int *port, GError **error);

/* Under srun (SLURM_JOB_ID and SLURM_PROCID set): where the step meets. *connect is
 * FIRST_NODE:PORT, *listen is the wildcard address at PORT (served by task 0, which must
 * run on the first node); *nodes the number of nodes of the step. FALSE with *error for
 * malformed variables; TRUE with *connect NULL outside srun. */
gboolean ks_slurm_meeting (char **connect, char **listen, int *nodes, GError **error);
/* The token of a step whose KS_STORE_TOKEN is unset: the job id and the user id. It keeps
 * jobs apart; it is no secret (export KS_STORE_TOKEN in the batch script for one). */
char *ks_slurm_token (void);

/* The node of each task of the step (NULL-terminated): srun's block distribution, node
 * j running the tasks after node j-1's; NULL and *error when the variables do not add
 * up to SLURM_NTASKS. */
char **ks_slurm_task_hosts (GError **error);

/* The ranks on this node and in the step (SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID, and
 * SLURM_NTASKS); FALSE outside srun or when they do not parse. */
gboolean ks_slurm_sizes (int *local, int *world);

#pragma GCC visibility pop
