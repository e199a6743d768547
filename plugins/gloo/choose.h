/* Which Gloo allreduce `[gloo] algorithm = auto` takes (plain C, so a test can call it). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

const char *ks_gloo_choose (const char *algorithm, gint64 small_bytes, gboolean several_hosts,
                            gsize bytes);

G_END_DECLS
