/* ksdist — the plugin ABI.
 *
 * For every plugin author: the descriptor, the ABI version and the settings a plugin
 * declares.
 *
 * A plugin is a shared object named <name>.so that exports one function,
 * ks_plugin_descriptor(), returning a const KsPluginDesc. The descriptor lists the
 * implementations the plugin provides (several, of several kinds) and the settings it
 * declares. Every vtable starts with its own size in bytes; methods are only ever
 * appended, and the core calls a method only after KS_OPS_HAS() says the slot exists
 * in the plugin's copy of the vtable.
 *
 * Compatibility: the core loads a plugin whose ABI major equals KS_ABI_MAJOR and whose
 * ABI minor is not newer than KS_ABI_MINOR. Adding a method (appending a slot) bumps
 * the minor; changing or removing anything bumps the major. KsPluginDesc may gain
 * members at its end in a minor release (the core reads them only from plugins whose
 * abi_minor has them); KsImplDesc and KsKeyDesc come in arrays, so their size is fixed
 * for a major version.
 *
 * ABI 1.1 appended a `traits` word to KsComputeOps, KsCommOps and KsAlgorithmOps: what
 * the implementation is (its memory, its reach, its need for servers), so that the core
 * chooses and checks by what a part declares, never by its name. A plugin built for 1.0
 * has no such slot and gets each kind's default traits (compute.h, comm.h,
 * algorithm.h), which are what the core assumed of any such plugin before. It also
 * appended KsAlgorithmOps.run_server_cancellable: a blocking slot that takes a
 * GCancellable (GIO's), so that a mode is told to stop without knowing the trainer.
 * ABI 1.2 appended the optional KsComputeOps conv2d and conv2d_backward: a whole
 * convolution, so that a backend can run the batch's chunks on its threads.
 * ABI 1.3 appended the setting type KS_VALUE_PATH (a file to read, resolved beside the
 * config file): a plugin that declares one is refused by an older core, which would not
 * know the type.
 * ABI 1.4 appended KsPluginDesc.check_settings: a plugin refuses a combination of its
 * own settings that no single key's range can, a key that its other settings leave
 * unused say, in the check `ksdist config` runs, before any job starts. */
#ifndef KSDIST_PLUGIN_H
#define KSDIST_PLUGIN_H

#include <stddef.h>
#include <ksdist/config.h>

G_BEGIN_DECLS

#define KS_ABI_MAJOR 1
#define KS_ABI_MINOR 4

#define KS_PLUGIN_ENTRY_SYMBOL "ks_plugin_descriptor"

/* The kinds of implementation. Values are ABI: append only. */
typedef enum {
  KS_KIND_COMPUTE = 0,    /* KsComputeOps    (compute.h) */
  KS_KIND_COMM = 1,       /* KsCommOps       (comm.h) */
  KS_KIND_STORE = 2,      /* KsStoreOps      (comm.h) */
  KS_KIND_ROLE_MAKER = 3, /* KsRoleMakerOps  (rolemaker.h) */
  KS_KIND_SEGMENTER = 4,  /* KsSegmenterOps  (segmenter.h) */
  KS_KIND_OPTIMIZER = 5,  /* KsOptimizerOps  (optimizer.h) */
  KS_KIND_ALGORITHM = 6,  /* KsAlgorithmOps  (algorithm.h) */
  KS_KIND_COUNT
} KsKind;

/* "compute", "comm", ...; "?" for a value out of range. */
const char *ks_kind_name (KsKind kind);

/* The settings a plugin instance reads: its own group of the configuration. */
typedef struct KsSettings KsSettings;
const char *ks_settings_plugin (const KsSettings *settings);
const char *ks_settings_get_string (const KsSettings *settings, const char *key);
gint64 ks_settings_get_int (const KsSettings *settings, const char *key);
double ks_settings_get_double (const KsSettings *settings, const char *key);
gboolean ks_settings_get_bool (const KsSettings *settings, const char *key);
/* TRUE when the user gave the key a value (file, environment or --set), not the default. */
gboolean ks_settings_is_set (const KsSettings *settings, const char *key);

/* A cheap, side-effect-free probe: returns a priority >= 0 when the implementation can
 * run on this machine, or a negative value and a reason (g_strdup'ed into *reason)
 * when it cannot. It must never crash or abort, e.g. on a machine without a GPU. */
typedef int (*KsQueryFunc) (char **reason);

typedef struct {
  KsKind kind;
  const char *name;   /* selection name, e.g. "openblas", "collective" */
  const void *ops;    /* the kind's vtable; its first member is `gsize size` */
  KsQueryFunc query;  /* NULL = always available at priority 0 */
  const char *description;
} KsImplDesc;

typedef struct {
  /* The first two members never move: the loader reads them before anything else. */
  guint32 abi_major;
  guint32 abi_minor;
  const char *name;        /* must equal the file name without ".so" */
  const char *version;     /* the plugin's own version */
  const char *description;
  const KsImplDesc *impls;
  gsize n_impls;
  const KsKeyDesc *settings; /* .group is ignored: the group is the plugin name */
  gsize n_settings;
  /* ABI 1.4, optional: FALSE and an error naming [<plugin>] and the key when the settings
   * contradict each other (e.g. a key set that another key's value leaves unused). Runs
   * in the check of every job and of `ksdist config`, whether or not the job uses the
   * plugin: what the file says must make sense on its own. */
  gboolean (*check_settings) (const KsSettings *settings, GError **error);
} KsPluginDesc;

typedef const KsPluginDesc *(*KsPluginEntryFunc) (void);

#define KS_EXPORT __attribute__ ((visibility ("default")))

/* Defines the entry point in a plugin's source: KS_PLUGIN_DEFINE (my_descriptor); */
#define KS_PLUGIN_DEFINE(desc)                                                     \
  KS_EXPORT const KsPluginDesc *ks_plugin_descriptor (void);                       \
  KS_EXPORT const KsPluginDesc *ks_plugin_descriptor (void) { return &(desc); }

/* TRUE when the vtable `ops` of type `Type` is long enough to hold `field` and sets it. */
#define KS_OPS_HAS(ops, Type, field)                                                   \
  ((ops) != NULL && (ops)->size >= offsetof (Type, field) + sizeof (((Type *) 0)->field) \
   && (ops)->field != NULL)

/* The data slot `field` of the vtable `ops` of type `Type` when the plugin's copy is long
 * enough to hold it, else `fallback` (a plugin built before the slot was appended). */
#define KS_OPS_VALUE(ops, Type, field, fallback)                                       \
  ((ops) != NULL && (ops)->size >= offsetof (Type, field) + sizeof (((Type *) 0)->field) \
       ? (ops)->field                                                                  \
       : (fallback))

/* The error a core wrapper returns when a plugin lacks a slot. Always returns FALSE. */
gboolean ks_set_not_supported (GError **error, const char *plugin, KsKind kind,
                               const char *method);

G_END_DECLS

#endif
