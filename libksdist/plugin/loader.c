/* Opening and validating one plugin file. Every way a file can be unusable ends in a
 * rejection reason, kept with its path; nothing here aborts. */
#include "loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A required method: its name (for messages) and where it sits in the vtable. */
typedef struct {
  const char *name;
  gsize offset;
} Slot;

#define REQUIRED(Type, field) { #field, offsetof (Type, field) }

/* The vtable size of ABI 1.0 of each kind, and the methods every implementation sets
 * (the list ends at the first unnamed slot). */
typedef struct {
  gsize min_size;
  Slot required[16];
} KindRules;

static const KindRules *
kind_rules (KsKind kind)
{
  static const KindRules compute = {
    offsetof (KsComputeOps, describe),
    { REQUIRED (KsComputeOps, create), REQUIRED (KsComputeOps, destroy),
      REQUIRED (KsComputeOps, alloc), REQUIRED (KsComputeOps, free),
      REQUIRED (KsComputeOps, copy_to_device), REQUIRED (KsComputeOps, copy_to_host) },
  };
  static const KindRules comm = {
    offsetof (KsCommOps, allgather),
    { REQUIRED (KsCommOps, create), REQUIRED (KsCommOps, destroy),
      REQUIRED (KsCommOps, connect), REQUIRED (KsCommOps, allreduce),
      REQUIRED (KsCommOps, broadcast), REQUIRED (KsCommOps, barrier) },
  };
  static const KindRules store = {
    offsetof (KsStoreOps, wait),
    { REQUIRED (KsStoreOps, create), REQUIRED (KsStoreOps, destroy), REQUIRED (KsStoreOps, open),
      REQUIRED (KsStoreOps, set), REQUIRED (KsStoreOps, get) },
  };
  static const KindRules role_maker = {
    offsetof (KsRoleMakerOps, all_gather),
    { REQUIRED (KsRoleMakerOps, create), REQUIRED (KsRoleMakerOps, destroy),
      REQUIRED (KsRoleMakerOps, generate_role), REQUIRED (KsRoleMakerOps, is_worker),
      REQUIRED (KsRoleMakerOps, is_server), REQUIRED (KsRoleMakerOps, is_first_worker),
      REQUIRED (KsRoleMakerOps, worker_num), REQUIRED (KsRoleMakerOps, worker_index),
      REQUIRED (KsRoleMakerOps, server_num), REQUIRED (KsRoleMakerOps, server_index),
      REQUIRED (KsRoleMakerOps, get_trainer_endpoints),
      REQUIRED (KsRoleMakerOps, get_pserver_endpoints), REQUIRED (KsRoleMakerOps, to_string) },
  };
  static const KindRules segmenter = {
    sizeof (KsSegmenterOps),
    { REQUIRED (KsSegmenterOps, create), REQUIRED (KsSegmenterOps, destroy),
      REQUIRED (KsSegmenterOps, segment) },
  };
  static const KindRules optimizer = {
    offsetof (KsOptimizerOps, minimize),
    { REQUIRED (KsOptimizerOps, create), REQUIRED (KsOptimizerOps, destroy),
      REQUIRED (KsOptimizerOps, backward), REQUIRED (KsOptimizerOps, apply_gradients) },
  };
  static const KindRules algorithm = {
    offsetof (KsAlgorithmOps, init_worker),
    { REQUIRED (KsAlgorithmOps, create), REQUIRED (KsAlgorithmOps, destroy),
      REQUIRED (KsAlgorithmOps, init) },
  };
  static const KindRules *const rules[] = { &compute, &comm, &store, &role_maker,
                                            &segmenter, &optimizer, &algorithm };
  G_STATIC_ASSERT (G_N_ELEMENTS (rules) == KS_KIND_COUNT);
  return (guint) kind < KS_KIND_COUNT ? rules[kind] : NULL;
}

/* Checks one implementation of a descriptor; returns a reason or NULL. */
static char *
check_impl (const KsImplDesc *impl, gsize index)
{
  const KindRules *rules = kind_rules (impl->kind);
  const char *label = impl->name != NULL ? impl->name : "(unnamed)";
  gsize size;

  if (rules == NULL)
    return g_strdup_printf ("implementation %" G_GSIZE_FORMAT " ('%s') has unknown kind %d",
                            index, label, (int) impl->kind);
  if (impl->name == NULL || *impl->name == '\0')
    return g_strdup_printf ("implementation %" G_GSIZE_FORMAT " has no name", index);
  if (impl->ops == NULL)
    return g_strdup_printf ("%s implementation '%s' has no vtable", ks_kind_name (impl->kind),
                            label);
  /* Read as bytes: the vtable is a struct of another type, of the plugin's size. */
  memcpy (&size, impl->ops, sizeof size);
  if (size < rules->min_size)
    return g_strdup_printf ("%s implementation '%s': vtable of %" G_GSIZE_FORMAT
                            " bytes is smaller than ABI 1.0's %" G_GSIZE_FORMAT,
                            ks_kind_name (impl->kind), label, size, rules->min_size);
  for (const Slot *req = rules->required; req->name != NULL; req++)
    {
      void (*slot) (void);
      memcpy (&slot, (const char *) impl->ops + req->offset, sizeof slot);
      if (slot == NULL)
        return g_strdup_printf ("%s implementation '%s' leaves the required method %s unset",
                                ks_kind_name (impl->kind), label, req->name);
    }
  return NULL;
}

static char *
check_settings (const KsPluginDesc *desc)
{
  for (gsize i = 0; i < desc->n_settings; i++)
    {
      const KsKeyDesc *k = &desc->settings[i];
      g_autofree char *expected = NULL;
      if (k->key == NULL || *k->key == '\0')
        return g_strdup_printf ("setting %" G_GSIZE_FORMAT " has no key", i);
      for (gsize j = 0; j < i; j++)
        if (g_strcmp0 (desc->settings[j].key, k->key) == 0)
          return g_strdup_printf ("setting '%s' is declared twice", k->key);
      if (k->type == KS_VALUE_CHOICE && k->choices == NULL)
        return g_strdup_printf ("setting '%s' is a choice without choices", k->key);
      if (k->default_value != NULL && !ks_config_check_value (k, k->default_value, &expected))
        return g_strdup_printf ("setting '%s': default '%s' is not %s", k->key,
                                k->default_value, expected);
    }
  return NULL;
}

char *
ks_loader_check_descriptor (const KsPluginDesc *desc, const char *file_name)
{
  char *reason;

  if (desc->abi_major != KS_ABI_MAJOR)
    return g_strdup_printf ("built for plugin ABI %u.%u, this ksdist has ABI %d.%d: rebuild the "
                            "plugin against this ksdist",
                            desc->abi_major, desc->abi_minor, KS_ABI_MAJOR, KS_ABI_MINOR);
  if (desc->abi_minor > KS_ABI_MINOR)
    return g_strdup_printf ("built for plugin ABI %u.%u, newer than this ksdist's %d.%d: "
                            "upgrade ksdist or rebuild the plugin against this one",
                            desc->abi_major, desc->abi_minor, KS_ABI_MAJOR, KS_ABI_MINOR);
  if (desc->name == NULL || strcmp (desc->name, file_name) != 0)
    return g_strdup_printf ("descriptor names the plugin '%s' but the file is %s.so: rename "
                            "one to match the other",
                            desc->name != NULL ? desc->name : "(null)", file_name);
  if (desc->n_impls > 0 && desc->impls == NULL)
    return g_strdup ("descriptor lists implementations but gives no array");
  if (desc->n_settings > 0 && desc->settings == NULL)
    return g_strdup ("descriptor lists settings but gives no array");
  for (gsize i = 0; i < desc->n_impls; i++)
    if ((reason = check_impl (&desc->impls[i], i)) != NULL)
      return reason;
  return check_settings (desc);
}

/* A plugin's code runs inside the training job: refuse files and directories that
 * other users could have written, and files owned by someone else than us or root. */
char *
ks_loader_check_permissions (const char *path)
{
  /* Through symbolic links: what counts is the file that will be mapped and the
   * directory that holds it. */
  g_autofree char *real = realpath (path, NULL);
  g_autofree char *dir = NULL;
  const char *checked[2];
  struct stat st;

  if (real == NULL)
    return g_strdup_printf ("cannot resolve %s: %s", path, g_strerror (errno));
  dir = g_path_get_dirname (real);
  checked[0] = real;
  checked[1] = dir;

  for (guint i = 0; i < G_N_ELEMENTS (checked); i++)
    {
      if (stat (checked[i], &st) != 0)
        return g_strdup_printf ("cannot stat %s: %s", checked[i], g_strerror (errno));
      if ((st.st_mode & S_IWOTH) != 0)
        return g_strdup_printf ("%s is writable by other users (mode %03o): a stranger's code "
                                "must not run in a training job; run chmod o-w %s",
                                checked[i], (unsigned) (st.st_mode & 0777), checked[i]);
      if (st.st_uid != 0 && st.st_uid != geteuid ())
        return g_strdup_printf ("%s belongs to user %u, neither root nor this user (%u): "
                                "install it as yourself or as root",
                                checked[i], (unsigned) st.st_uid, (unsigned) geteuid ());
    }
  return NULL;
}

/* OpenMP's threads (OpenBLAS's OpenMP build and the openblas plugin's kernels share its
 * pool) spin between parallel regions by default: on cores other processes also use, a
 * spinning thread holds the core the thread it waits for needs (2 threads ran the CNN of
 * examples/cnn-idx.ini 15 to 27 times slower than 1 on a busy 2-core machine). Sleeping
 * between regions costs a wake-up each; OMP_WAIT_POLICY=active keeps the spinning, for
 * cores of one's own. libgomp reads it once, when a plugin first loads it: before dlopen. */
static void
omp_wait_passive (void)
{
  static gsize once = 0;
  if (g_once_init_enter (&once))
    {
      if (g_getenv ("OMP_WAIT_POLICY") == NULL && g_getenv ("GOMP_SPINCOUNT") == NULL)
        g_setenv ("OMP_WAIT_POLICY", "passive", FALSE);
      g_once_init_leave (&once, 1);
    }
}

const KsPluginDesc *
ks_loader_open (const char *path, const char *file_name, char **reason)
{
  void *handle;
  KsPluginEntryFunc entry;
  const KsPluginDesc *desc;

  if ((*reason = ks_loader_check_permissions (path)) != NULL)
    return NULL;
  omp_wait_passive ();
  dlerror ();
  /* Never closed: a plugin's code may have left destructors, threads or callbacks. */
  handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    {
      *reason = g_strdup_printf ("cannot be opened: %s", dlerror ());
      return NULL;
    }
  dlerror ();
  entry = (KsPluginEntryFunc) dlsym (handle, KS_PLUGIN_ENTRY_SYMBOL);
  if (entry == NULL)
    {
      const char *why = dlerror ();
      *reason = g_strdup_printf ("no entry symbol %s(): %s", KS_PLUGIN_ENTRY_SYMBOL,
                                 why != NULL ? why : "symbol is NULL");
      return NULL;
    }
  desc = entry ();
  if (desc == NULL)
    {
      *reason = g_strdup_printf ("%s() returned NULL", KS_PLUGIN_ENTRY_SYMBOL);
      return NULL;
    }
  if ((*reason = ks_loader_check_descriptor (desc, file_name)) != NULL)
    return NULL;
  return desc;
}
