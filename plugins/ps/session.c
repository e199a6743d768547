/* Worker sessions in routing ids (session.h). */
#include "session.h"

#include <ksdist/ksdist.h>

#include <string.h>
#include <sys/random.h>
#include <zmq.h>

#define SESSION_VARIABLE "KS_PS_WORKER_SESSION"

gboolean
ps_session_parse (const char *hex, guint8 session[PS_SESSION_BYTES])
{
  if (strlen (hex) != 2 * PS_SESSION_BYTES)
    return FALSE;
  for (int i = 0; i < PS_SESSION_BYTES; i++)
    {
      int hi = g_ascii_xdigit_value (hex[2 * i]), lo = g_ascii_xdigit_value (hex[2 * i + 1]);
      if (hi < 0 || lo < 0)
        return FALSE;
      session[i] = (guint8) (hi << 4 | lo);
    }
  session[0] |= 1; /* a routing id must not begin with 0 (ZeroMQ keeps those) */
  return TRUE;
}

gboolean
ps_session_get (guint8 session[PS_SESSION_BYTES], GError **error)
{
  static guint8 drawn[PS_SESSION_BYTES];
  static gsize once;
  const char *given = g_getenv (SESSION_VARIABLE);

  if (given != NULL)
    {
      if (!ps_session_parse (given, session))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s = '%s': not %d hex digits (it names the session a tool speaks "
                       "for a worker in; unset it)", SESSION_VARIABLE, given,
                       2 * PS_SESSION_BYTES);
          return FALSE;
        }
    }
  else
    {
      if (g_once_init_enter (&once))
        {
          if (getrandom (drawn, sizeof drawn, 0) != (gssize) sizeof drawn)
            for (int i = 0; i < PS_SESSION_BYTES; i++) /* no getrandom: GLib's, seeded so */
              drawn[i] = (guint8) g_random_int ();
          g_once_init_leave (&once, 1);
        }
      memcpy (session, drawn, PS_SESSION_BYTES);
      session[0] |= 1;
    }
  return TRUE;
}

void
ps_session_set_routing_id (void *socket, const guint8 session[PS_SESSION_BYTES], guint32 n)
{
  guint8 id[PS_SESSION_BYTES + 4];

  memcpy (id, session, PS_SESSION_BYTES);
  memcpy (id + PS_SESSION_BYTES, &n, sizeof n);
  zmq_setsockopt (socket, ZMQ_ROUTING_ID, id, sizeof id);
}

gboolean
ps_session_owns (GBytes *id, const guint8 session[PS_SESSION_BYTES])
{
  gsize len;
  const guint8 *bytes = g_bytes_get_data (id, &len);
  return len == PS_SESSION_BYTES + 4 && memcmp (bytes, session, PS_SESSION_BYTES) == 0;
}
