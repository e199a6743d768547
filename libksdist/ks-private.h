/* Internal declarations of libksdist; not installed. */
#ifndef KS_PRIVATE_H
#define KS_PRIVATE_H

#include <config.h>
#include <json-glib/json-glib.h>
#include <ksdist/ksdist.h>

/* the library's insides: not exported (libksdist.so exports the public API only) */
#pragma GCC visibility push(hidden)

G_BEGIN_DECLS

/* config-schema.c */
const KsKeyDesc *ks_core_schema (gsize *n_keys);
/* The core setting group.key (which must exist): its range checks a value read
 * elsewhere, such as a checkpoint's, as the config checks the setting. */
const KsKeyDesc *ks_core_key (const char *group, const char *key);
gboolean ks_is_first_party_plugin (const char *name);

/* optimizer.c: the optimizer's state arenas and step, for checkpoints */
/* optimizer.c: binds an optimizer to every parameter of `model` (what the first
 * ks_optimizer_apply does), so that its state can be loaded before a step */
void ks_optimizer_bind (KsOptimizer *optimizer, KsModel *model);
/* The plan's check (ksdist config): an optimizer without the `state` slot cannot write
 * [train] checkpoint_dir's checkpoints, and one that neither reads [optim] nor has
 * set_learning_rate cannot take an [optim] lr or schedule set for it. */
gboolean ks_optimizer_check_plan (KsOptimizer *optimizer, const KsConfig *config,
                                  GError **error);
/* optimizer.c: a wrapper of `inner` (taken over) whose ops and ctx are `ops`, `ctx` */
KsOptimizer *ks_optimizer_new_wrapper (KsOptimizer *inner, const KsOptimizerOps *ops, void *ctx,
                                       const KsPluginRecord *plugin);

/* dist-optimizer.c: an optimizer's clipping: its clip_norm setting and a device scalar
 * for the sum of squares, made on first use */
typedef struct {
  double max_norm;
  KsCompute *compute;
  float *scratch;
} KsClip;
void ks_clip_clear (KsClip *clip);
/* dist-optimizer.c: the base's update of an optimizer used alone (no mode) */
gboolean ks_dist_update_alone (const KsOptimizerOps *ops, void *ctx, KsClip *clip,
                               KsModel *model, const KsParamGrad *pairs, gsize n_pairs,
                               GError **error);
/* dist-optimizer.c: a wrapper made by ks_dist_optimizer_new takes its inner optimizer's
 * clip_norm (other wrappers are left as they are) */
void ks_dist_optimizer_adopt (KsOptimizer *wrapper);
gboolean ks_optimizer_state (KsOptimizer *optimizer, KsArena ***arenas, gsize *n, gint64 **step,
                             GError **error);

/* checkpoint.c: a new string-to-string table holding a copy of `from` (may be NULL) */
GHashTable *ks_string_table_copy (GHashTable *from);
/* checkpoint.c: a KS_CHECKPOINT_ERROR_IO "WHAT PATH: strerror (errno)"; FALSE */
gboolean ks_io_error (GError **error, const char *what, const char *path);
/* checkpoint.c: writes a checkpoint file into the directory `final` (replaced whole)
 * with `meta` and format, version, rng_state and the optimizer's entries */
gboolean ks_checkpoint_write_dir (const char *final, KsModel *model, KsOptimizer *optimizer,
                                  GHashTable *meta, GError **error);

/* safetensors.c: a new file beside `path`, for writing it whole before a rename over
 * it: created by this call alone under a random hidden name (O_EXCL, no link followed,
 * never a FIFO or a file planted there), its name in *tmp; -1 with an error */
int ks_io_create_beside (const char *path, char **tmp, GError **error);
/* safetensors.c: a KS_CHECKPOINT_ERROR `code` "FILE: message"; FALSE */
gboolean ks_checkpoint_corrupt (GError **error, int code, const char *file, const char *format,
                                ...) G_GNUC_PRINTF (4, 5);
/* safetensors.c: ks_safetensors_check, keeping the parsed header (parsed by `parser`). */
gboolean ks_safetensors_parse (const char *file, const char *bytes, gsize len,
                               JsonParser *parser, guint64 *header_len, JsonObject **header,
                               GError **error);

/* compute.c: the first index of perm that breaks it being a permutation of
 * 0 .. ndim - 1 (out of range or repeated), or -1 when it is one */
int ks_permutation_flaw (int ndim, const int *perm);

/* KS_COMPUTE_ERROR_INVALID for a call's bad arguments; returns FALSE */
#define ks_invalid(error, ...) ks_fail (error, KS_COMPUTE_ERROR, KS_COMPUTE_ERROR_INVALID, __VA_ARGS__)

/* suggest.c */
/* compares two char** for g_ptr_array_sort */
int ks_strcmp_indirect (gconstpointer a, gconstpointer b);
/* `text` fit to quote in a message: bytes other than printable ASCII and UTF-8 as \xNN
 * (a value from a file must not drive the terminal), cut after `max` bytes with the
 * length said. */
char *ks_printable (const char *text, gsize max);

/* config-comments.c: `text` with each comment after a value or group header cut (a '#'
 * or ';' at the value's start or after a blank, to the line's end); \# and \; in a
 * value become # and ;. Lines keep their numbers. */
char *ks_config_strip_comments (const char *text);
/* config-paths.c: whether [group] key names a file or folder a run reads; the path a
 * relative `value` written in `config_file` has beside it when something is there (else
 * NULL: the value, from the current directory); and the check that what a setting names
 * is there, one error naming the setting, where it was set and the rule otherwise. */
char *ks_config_path_resolve (const char *config_file, const char *value);
gboolean ks_config_path_check (const char *group, const char *key, const char *value,
                               const char *config_file, gboolean from_file, const char *where,
                               GError **error);
/* config-env.c: the KS_<GROUP>_<KEY> variables of the environment whose group is known
 * and key is not, refused with a did-you-mean (ks_config_validate calls it). */
gboolean ks_config_check_environment (const KsConfig *config, GError **error);

/* settings.c */
KsSettings *ks_settings_new (const KsConfig *config, const char *plugin);
void ks_settings_free (KsSettings *settings);

/* instance.c: one created implementation of any kind */
typedef struct {
  const KsImplDesc *impl;
  const KsPluginRecord *plugin;
  KsSettings *settings;
  void *ctx;
} KsInstance;

/* The common head of every vtable: size, create, destroy. */
typedef struct {
  gsize size;
  void *(*create) (const KsSettings *settings, GError **error);
  void (*destroy) (void *ctx);
} KsOpsHead;

/* Selects and creates an implementation. The result is `struct_size` zeroed bytes that
 * begin with the KsInstance, so a kind's public type (struct KsCompute { KsInstance
 * instance; }) is made and freed here. */
KsInstance *ks_instance_new (KsRegistry *registry, const KsConfig *config, KsKind kind,
                             const char *name, gsize struct_size, GError **error);
void ks_instance_free (KsInstance *instance);

struct KsCompute {
  KsInstance instance;
  guint64 to_device, to_host; /* copies made (ks_compute_transfers) */
};
struct KsAlgorithm {
  KsInstance instance; /* first: freed as one */
  GCancellable *cancellable; /* ks_algorithm_set_cancellable's */
};
struct KsOptimizer {
  KsInstance instance;
  KsModel *model;
  KsExpr *loss;
  GArray *pairs; /* KsParamGrad */
  /* a distributed optimizer: the wrapped one (owned) and the description of the
   * algorithm's wrapper, whose ops and ctx instance.impl and .ctx are */
  KsOptimizer *inner;
  KsImplDesc wrapper;
  KsClip clip; /* the one used alone: its [optim] clip_norm, read when it is made */
  /* an optimizer that does not read [optim] itself: the core sets its rate each step */
  gboolean fed;
  KsLrSchedule schedule;
  gint64 applied; /* updates so far, for one without a state slot */
};

/* Whether `compute` has the optional slots a model op named `op` (ks_op_name: conv2d,
 * max_pool, avg_pool, batch_norm) needs forward and backward: a configuration error naming
 * the backend, the slot and `layer` otherwise, so a model the backend cannot run is
 * refused when it is built (by ksdist config too), not at its first step. */
gboolean ks_compute_supports_op (KsCompute *compute, const char *op, const char *layer,
                                 GError **error);

/* Calls through a slot of an instance's vtable, or fails with "not supported". */
#define KS_INSTANCE_OPS(inst, Type) ((const Type *) (inst)->impl->ops)
#define KS_REQUIRE_SLOT(inst, Type, field, error)                                       \
  G_STMT_START                                                                          \
  {                                                                                     \
    if (!KS_OPS_HAS (KS_INSTANCE_OPS (inst, Type), Type, field))                        \
      return ks_set_not_supported ((error), (inst)->plugin->name, (inst)->impl->kind,   \
                                   #field);                                             \
  }                                                                                     \
  G_STMT_END

G_END_DECLS

#pragma GCC visibility pop

#endif
