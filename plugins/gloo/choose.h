/* Which Gloo allreduce `[gloo] algorithm = auto` takes (plain C, so a test can call it). */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* What `auto` knows of a communicator: its settings and where its ranks are. */
typedef struct {
  gint64 small_bytes;      /* [gloo] auto_small_bytes */
  gint64 hosts_ring_bytes; /* [gloo] auto_hosts_ring_bytes */
  gboolean several_hosts;
  int ranks;
} KsGlooAuto;

/* `algorithm` itself unless it is "auto"; else what `auto` takes for a message of `bytes`. */
const char *ks_gloo_choose (const char *algorithm, const KsGlooAuto *a, gsize bytes);
/* The rule `auto` follows for `a`, in words for the log (g_free it). */
char *ks_gloo_auto_describe (const KsGlooAuto *a);

G_END_DECLS
