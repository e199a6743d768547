/* How the dense parameters are cut into blocks and spread over the servers. */
#ifndef KS_PS_LAYOUT_H
#define KS_PS_LAYOUT_H

#include <ksdist/ksdist.h>

/* A range of one parameter, held by one server. */
typedef struct {
  char *name;         /* "<parameter>@<first element>": the block's name on its server */
  char *param;        /* the parameter's name */
  gsize offset;       /* first element within the parameter */
  gsize len;          /* elements */
  gsize arena_offset; /* of the first element in the model's parameter arena (floats) */
  int server;
} PsBlock;

typedef struct {
  PsBlock *blocks; /* in parameter order, each parameter's blocks in element order */
  gsize n_blocks;
  int servers;
  gsize *server_floats; /* floats each server holds: the length of its messages */
  guint64 fingerprint;  /* of the names, sizes and the cut: equal on every process */
} PsLayout;

/* Paddle's slice_variable: a parameter of n elements is cut into min(servers,
 * max(1, n / min_block)) near-equal blocks, and the blocks of all parameters go to the
 * servers round-robin. */
PsLayout *ps_layout_new (const KsArena *params, int servers, gsize min_block);
/* As ps_layout_new, leaving out the parameters named in `skip` (NULL-terminated; the
 * pslib mode's rows of sparse tables). */
PsLayout *ps_layout_new_without (const KsArena *params, int servers, gsize min_block,
                                 const char *const *skip);
void ps_layout_free (PsLayout *layout);
/* The indices of server `s`'s blocks, in order (g_free). */
gsize *ps_layout_server_blocks (const PsLayout *layout, int s, gsize *n);

#endif
