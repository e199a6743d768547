/* Traits (ABI 1.1): what an implementation declares of itself (its memory, its reach, its
 * need for servers), read from the word appended to its vtable, so that the trainer's
 * plan and its choice of communicator ask these and never a plugin's name. */
#include "ks-private.h"

#include <string.h>

guint32
ks_impl_traits (const KsImplDesc *impl)
{
  switch (impl->kind)
    {
    case KS_KIND_COMPUTE:
      return KS_OPS_VALUE ((const KsComputeOps *) impl->ops, KsComputeOps, traits,
                           KS_COMPUTE_TRAITS_1_0);
    case KS_KIND_COMM:
      return KS_OPS_VALUE ((const KsCommOps *) impl->ops, KsCommOps, traits,
                           KS_COMM_TRAITS_1_0);
    case KS_KIND_ALGORITHM:
      return KS_OPS_VALUE ((const KsAlgorithmOps *) impl->ops, KsAlgorithmOps, traits,
                           KS_ALGORITHM_TRAITS_1_0);
    default:
      return 0;
    }
}

gboolean
ks_registry_traits (KsRegistry *registry, KsKind kind, const char *name, guint32 *traits)
{
  const KsImplDesc *impl = ks_registry_select (registry, kind, name, NULL, NULL);
  if (impl == NULL)
    return FALSE;
  *traits = ks_impl_traits (impl);
  return TRUE;
}

/* The available implementations of `kind` whose traits match, in search order. */
static GPtrArray *
matching (KsRegistry *registry, KsKind kind, guint32 mask, guint32 want)
{
  GPtrArray *list = ks_registry_list (registry, kind);
  for (guint i = list->len; i-- > 0;)
    {
      const KsImplInfo *info = g_ptr_array_index (list, i);
      if (info->priority < 0 || (ks_impl_traits (info->impl) & mask) != want)
        g_ptr_array_remove_index (list, i);
    }
  return list;
}

const KsImplDesc *
ks_registry_choose (KsRegistry *registry, KsKind kind, guint32 mask, guint32 want)
{
  g_autoptr (GPtrArray) list = matching (registry, kind, mask, want);
  const KsImplInfo *best = NULL;

  for (guint i = 0; i < list->len; i++)
    {
      const KsImplInfo *info = g_ptr_array_index (list, i);
      if (best == NULL || info->priority > best->priority)
        best = info;
    }
  return best != NULL ? best->impl : NULL;
}

char *
ks_registry_names_with (KsRegistry *registry, KsKind kind, guint32 mask, guint32 want)
{
  g_autoptr (GPtrArray) list = matching (registry, kind, mask, want);
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < list->len; i++)
    g_string_append_printf (s, "%s%s", i == 0 ? "" : i + 1 == list->len ? " or " : ", ",
                            ((const KsImplInfo *) g_ptr_array_index (list, i))->impl->name);
  return g_string_free (s, FALSE);
}
