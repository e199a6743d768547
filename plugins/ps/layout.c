/* The cut of the dense parameters into blocks (layout.h). */
#include "layout.h"

#include <string.h>

static guint64
fnv1a (guint64 h, const void *data, gsize n)
{
  const guint8 *p = data;
  for (gsize i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

PsLayout *
ps_layout_new (const KsArena *params, int servers, gsize min_block)
{
  return ps_layout_new_without (params, servers, min_block, NULL);
}

PsLayout *
ps_layout_new_without (const KsArena *params, int servers, gsize min_block,
                       const char *const *skip)
{
  PsLayout *l = g_new0 (PsLayout, 1);
  GArray *blocks = g_array_new (FALSE, TRUE, sizeof (PsBlock));
  guint64 h = 1469598103934665603ull;
  gsize next = 0; /* round-robin over the servers */

  l->servers = servers;
  l->server_floats = g_new0 (gsize, servers);
  for (gsize i = 0; i < ks_arena_count (params); i++)
    {
      const char *name;
      gsize base;
      const KsTensor *t = ks_arena_tensor_at (params, i, &name, &base);
      if (skip != NULL && g_strv_contains (skip, name))
        continue;
      gsize n = t->numel, parts = MIN ((gsize) servers, MAX (1, n / MAX (min_block, 1)));
      gsize size = (n + parts - 1) / parts;
      for (gsize off = 0; off < n; off += size)
        {
          PsBlock b = { g_strdup_printf ("%s@%" G_GSIZE_FORMAT, name, off), g_strdup (name), off,
                        MIN (size, n - off), base + off, (int) (next++ % servers) };
          l->server_floats[b.server] += b.len;
          h = fnv1a (h, b.name, strlen (b.name) + 1);
          h = fnv1a (h, &b.len, sizeof b.len);
          h = fnv1a (h, &b.server, sizeof b.server);
          g_array_append_val (blocks, b);
        }
    }
  l->fingerprint = h;
  l->n_blocks = blocks->len;
  l->blocks = (PsBlock *) g_array_free (blocks, FALSE);
  return l;
}

void
ps_layout_free (PsLayout *l)
{
  if (l == NULL)
    return;
  for (gsize i = 0; i < l->n_blocks; i++)
    {
      g_free (l->blocks[i].name);
      g_free (l->blocks[i].param);
    }
  g_free (l->blocks);
  g_free (l->server_floats);
  g_free (l);
}

gsize *
ps_layout_server_blocks (const PsLayout *l, int s, gsize *n)
{
  gsize *out = g_new (gsize, l->n_blocks + 1);
  *n = 0;
  for (gsize i = 0; i < l->n_blocks; i++)
    if (l->blocks[i].server == s)
      out[(*n)++] = i;
  return out;
}
