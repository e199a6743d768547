/* A plugin built only for the tests, in several variants chosen by macros:
 *   TP_NAME             the descriptor's name (also the module's file name)
 *   TP_ABI_MAJOR_DELTA  added to KS_ABI_MAJOR (a plugin for another ABI)
 *   TP_ABI_MINOR_DELTA  added to KS_ABI_MINOR (a plugin for a newer core)
 *   TP_UNAVAILABLE      its query reports it cannot run here
 *   TP_NO_REQUIRED_SLOT its compute vtable leaves `alloc` unset
 *   TP_NO_ENTRY         exports no descriptor at all
 *   TP_ALGORITHMS       also provides the "collective" and "transpiler" algorithms
 *   TP_BAD_SETTING=1    declares the setting "level" twice
 *   TP_BAD_SETTING=2    gives "level" a default outside its own range
 * The compute implementation keeps host memory and reports its settings in describe(). */
#include <ksdist/ksdist.h>

#include <stdlib.h>
#include <string.h>

#ifndef TP_ABI_MAJOR_DELTA
#define TP_ABI_MAJOR_DELTA 0
#endif
#ifndef TP_ABI_MINOR_DELTA
#define TP_ABI_MINOR_DELTA 0
#endif
#ifndef TP_BAD_SETTING
#define TP_BAD_SETTING 0
#endif

typedef struct {
  gint64 level;
  char *label;
} TestCtx;

static void *
tp_create (const KsSettings *settings, GError **error)
{
  TestCtx *ctx = g_new0 (TestCtx, 1);
  ctx->level = ks_settings_get_int (settings, "level");
  ctx->label = g_strdup (ks_settings_get_string (settings, "label"));
  if (strcmp (ctx->label, "fail") == 0)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED, "label 'fail' asks to fail");
      g_free (ctx->label);
      g_free (ctx);
      return NULL;
    }
  return ctx;
}

static void
tp_destroy (void *p)
{
  TestCtx *ctx = p;
  g_free (ctx->label);
  g_free (ctx);
}

static char *
tp_describe (void *p)
{
  TestCtx *ctx = p;
  return g_strdup_printf ("level=%" G_GINT64_FORMAT " label=%s", ctx->level, ctx->label);
}

#ifndef TP_NO_REQUIRED_SLOT
static void *
tp_alloc (void *ctx, gsize nbytes, GError **error)
{
  return g_malloc0 (MAX (nbytes, 1));
}
#endif

static void
tp_free (void *ctx, void *ptr)
{
  g_free (ptr);
}

static gboolean
tp_copy (void *ctx, void *dst, const void *src, gsize nbytes, GError **error)
{
  memcpy (dst, src, nbytes);
  return TRUE;
}

/* Lies beyond the size this vtable declares: the core must never call it. */
static gboolean
tp_beyond_size (void *ctx, GError **error)
{
  abort ();
}

static const KsComputeOps tp_compute_ops = {
  /* As if built against an older ABI 1.x whose vtable ended before synchronize. */
  .size = offsetof (KsComputeOps, synchronize),
  .create = tp_create,
  .destroy = tp_destroy,
#ifndef TP_NO_REQUIRED_SLOT
  .alloc = tp_alloc,
#endif
  .free = tp_free,
  .copy_to_device = tp_copy,
  .copy_to_host = tp_copy,
  .describe = tp_describe,
  .synchronize = tp_beyond_size,
};

static int
tp_query (char **reason)
{
#ifdef TP_UNAVAILABLE
  *reason = g_strdup ("no test device on this machine");
  return -1;
#else
  return 1;
#endif
}

#ifdef TP_ALGORITHMS
static gboolean
tp_algorithm_init (void *ctx, KsRoleMaker *role, GError **error)
{
  ((TestCtx *) ctx)->level += 100; /* observable: init ran */
  return TRUE;
}

static gboolean
tp_algorithm_init_worker (void *ctx, GError **error)
{
  if (((TestCtx *) ctx)->level < 100)
    {
      g_set_error (error, KS_PLUGIN_ERROR, KS_PLUGIN_ERROR_FAILED, "init_worker before init");
      return FALSE;
    }
  return TRUE;
}

static const KsAlgorithmOps tp_algorithm_ops = {
  .size = sizeof (KsAlgorithmOps),
  .create = tp_create,
  .destroy = tp_destroy,
  .init = tp_algorithm_init,
  .init_worker = tp_algorithm_init_worker,
};
#endif

static const KsImplDesc tp_impls[] = {
  { KS_KIND_COMPUTE, TP_NAME, &tp_compute_ops, tp_query, "test compute" },
#ifdef TP_ALGORITHMS
  { KS_KIND_ALGORITHM, "collective", &tp_algorithm_ops, NULL, "test collective" },
  { KS_KIND_ALGORITHM, "transpiler", &tp_algorithm_ops, NULL, "test transpiler" },
#endif
};

static const KsKeyDesc tp_settings[] = {
#if TP_BAD_SETTING == 2
  { NULL, "level", KS_VALUE_INT, "10", 0, 9, NULL, "A number the tests set and read back" },
#else
  { NULL, "level", KS_VALUE_INT, "1", 0, 9, NULL, "A number the tests set and read back" },
#endif
  { NULL, "label", KS_VALUE_STRING, "plain", 1, 0, NULL, "A word the tests set and read back" },
#if TP_BAD_SETTING == 1
  { NULL, "level", KS_VALUE_INT, "2", 0, 9, NULL, "The same key again" },
#endif
};

static const KsPluginDesc tp_plugin = {
  .abi_major = KS_ABI_MAJOR + TP_ABI_MAJOR_DELTA,
  .abi_minor = KS_ABI_MINOR + TP_ABI_MINOR_DELTA,
  .name = TP_NAME,
  .version = "0.0.1-test",
  .description = "a plugin built for the tests",
  .impls = tp_impls,
  .n_impls = G_N_ELEMENTS (tp_impls),
  .settings = tp_settings,
  .n_settings = G_N_ELEMENTS (tp_settings),
};

#ifndef TP_NO_ENTRY
KS_PLUGIN_DEFINE (tp_plugin)
#else
/* Keeps the descriptor referenced so the variant still compiles without warnings. */
const KsPluginDesc *tp_unused_descriptor (void);
const KsPluginDesc *
tp_unused_descriptor (void)
{
  return &tp_plugin;
}
#endif
