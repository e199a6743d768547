/* Where a job on several nodes runs what: each node's workers and servers, learnt at the
 * launchers' meeting (launch-rendezvous.c).
 *
 * A collective node runs -n workers, the same on every node: job ranks are node-major.
 * A parameter-server node says how many workers and servers IT runs (--workers W
 * --servers S, either may be 0), as fleetrun places servers on some hosts and workers on
 * others; worker indices go node-major over the nodes' workers, server indices likewise
 * over their servers, and job ranks are the workers', then the servers' (as on one node).
 * Each node chooses its servers' ports free on its own host and says them at the
 * meeting, so every process learns every server's HOST:PORT. */
#include "launch.h"

#include <gio/gio.h>
#include <stdlib.h>
#include <string.h>

int
ks_launch_free_port (const char *host, GPtrArray *held)
{
  g_autoptr (GInetAddress) ip = g_inet_address_new_from_string (host);
  GSocket *socket;
  g_autoptr (GSocketAddress) any = NULL, bound = NULL;

  if (ip == NULL
      || (socket = g_socket_new (g_inet_address_get_family (ip), G_SOCKET_TYPE_STREAM,
                                 G_SOCKET_PROTOCOL_TCP, NULL))
             == NULL)
    return 0;
  g_ptr_array_add (held, socket);
  any = g_inet_socket_address_new (ip, 0);
  if (!g_socket_bind (socket, any, FALSE, NULL)
      || (bound = g_socket_get_local_address (socket, NULL)) == NULL)
    return 0;
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

char *
ks_launch_layout_mine (const LaunchRendezvous *rv, GError **error)
{
  if (!rv->ps)
    return g_strdup ("");
  g_autoptr (GPtrArray) held = g_ptr_array_new_with_free_func (g_object_unref);
  GString *out = g_string_new (NULL);
  g_string_printf (out, " %d %d ", rv->workers, rv->servers);
  if (rv->own_ports != NULL && rv->servers > 0) /* fleetrun's lists gave them */
    {
      g_string_append (out, rv->own_ports);
      return g_string_free (out, FALSE);
    }
  for (int i = 0; i < rv->servers; i++)
    {
      int port = ks_launch_free_port (rv->hosts[rv->node_rank], held);
      if (port == 0)
        {
          g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                       "no free TCP port on %s for server %d of this node",
                       rv->hosts[rv->node_rank], i);
          return g_string_free (out, TRUE), NULL;
        }
      g_string_append_printf (out, "%s%d", i > 0 ? "," : "", port);
    }
  if (rv->servers == 0)
    g_string_append (out, "-");
  return g_string_free (out, FALSE);
}

static const char *
kind (gboolean ps)
{
  return ps ? "a parameter-server job (--servers S --workers W)" : "a collective job (-n N)";
}

gboolean
ks_launch_layout_take (LaunchRendezvous *rv, int k, char **fields, GError **error)
{
  guint n = fields != NULL ? g_strv_length (fields) : 0;
  gint64 w = 0, s = 0;

  if (rv->node_workers == NULL)
    {
      rv->node_workers = g_new0 (int, rv->nnodes);
      rv->node_servers = g_new0 (int, rv->nnodes);
      rv->node_ports = g_new0 (char *, rv->nnodes + 1);
    }
  if ((n == 3) != rv->ps)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "node %d starts %s and this node (%d) %s: give every node the same kind",
                   k, kind (n == 3), rv->node_rank, kind (rv->ps));
      return FALSE;
    }
  if (!rv->ps)
    {
      rv->node_workers[k] = rv->nproc;
      return TRUE;
    }
  g_auto (GStrv) ports = g_strsplit (fields[2], ",", -1);
  if (!g_ascii_string_to_signed (fields[0], 10, 0, 1024, &w, NULL)
      || !g_ascii_string_to_signed (fields[1], 10, 0, 1024, &s, NULL)
      || (s > 0 ? g_strv_length (ports) != (guint) s : strcmp (fields[2], "-") != 0))
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_FAILED,
                   "node %d's launcher said '%s %s %s' of its workers, servers and ports: "
                   "is it another ksdist version? Start the same one on every node",
                   k, fields[0], fields[1], fields[2]);
      return FALSE;
    }
  rv->node_workers[k] = (int) w;
  rv->node_servers[k] = (int) s;
  g_free (rv->node_ports[k]);
  rv->node_ports[k] = g_strdup (s > 0 ? fields[2] : "");
  return TRUE;
}

int
ks_launch_layout_total (const LaunchRendezvous *rv, gboolean servers)
{
  int total = 0;
  for (int k = 0; k < rv->nnodes; k++)
    total += servers ? rv->node_servers[k] : rv->node_workers[k];
  return total;
}

/* "node 0: 1 server; node 1: 2 workers" */
static char *
who_runs_what (const LaunchRendezvous *rv)
{
  GString *out = g_string_new (NULL);
  for (int k = 0; k < rv->nnodes; k++)
    g_string_append_printf (out, "%snode %d: %d worker%s, %d server%s", k > 0 ? "; " : "", k,
                            rv->node_workers[k], rv->node_workers[k] == 1 ? "" : "s",
                            rv->node_servers[k], rv->node_servers[k] == 1 ? "" : "s");
  return g_string_free (out, FALSE);
}

gboolean
ks_launch_layout_check (const LaunchRendezvous *rv, GError **error)
{
  if (!rv->ps)
    return TRUE;
  int workers = ks_launch_layout_total (rv, FALSE), servers = ks_launch_layout_total (rv, TRUE);
  if (workers >= 1 && servers >= 1)
    return TRUE;
  g_autofree char *what = who_runs_what (rv);
  g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
               "the nodes start no %s in all (%s): a parameter-server job needs at least one; "
               "give it to a node with --%s",
               workers < 1 ? "worker" : "server", what, workers < 1 ? "workers" : "servers");
  return FALSE;
}

/* The first worker (or server) index of node k. */
static int
first_on (const LaunchRendezvous *rv, int k, gboolean servers)
{
  int first = 0;
  for (int j = 0; j < k; j++)
    first += servers ? rv->node_servers[j] : rv->node_workers[j];
  return first;
}

int
ks_launch_layout_rank (const LaunchRendezvous *rv, int i)
{
  int k = rv->node_rank;
  if (i < rv->node_workers[k])
    return first_on (rv, k, FALSE) + i;
  return ks_launch_layout_total (rv, FALSE) + first_on (rv, k, TRUE) + i - rv->node_workers[k];
}

char *
ks_launch_layout_servers (const LaunchRendezvous *rv)
{
  GString *out = g_string_new (NULL);
  for (int k = 0; k < rv->nnodes; k++)
    {
      g_auto (GStrv) ports = g_strsplit (rv->node_ports[k], ",", -1);
      for (int i = 0; i < rv->node_servers[k]; i++)
        g_string_append_printf (out, "%s%s%s%s:%s", out->len > 0 ? "," : "",
                                strchr (rv->hosts[k], ':') ? "[" : "", rv->hosts[k],
                                strchr (rv->hosts[k], ':') ? "]" : "", ports[i]);
    }
  return g_string_free (out, FALSE);
}

int
ks_launch_layout_node_of (const LaunchRendezvous *rv, int rank)
{
  if (rv->node_workers == NULL || rank < 0)
    return -1;
  gboolean server = rank >= ks_launch_layout_total (rv, FALSE);
  int index = server ? rank - ks_launch_layout_total (rv, FALSE) : rank;
  for (int k = 0; k < rv->nnodes; k++)
    {
      int here = server ? rv->node_servers[k] : rv->node_workers[k];
      if (index < here)
        return k;
      index -= here;
    }
  return -1;
}

/* "worker 3", "workers 0-1" */
static void
append_range (GString *out, const char *what, int first, int count)
{
  if (count == 1)
    g_string_append_printf (out, "%s%s %d", out->len > 0 ? ", " : "", what, first);
  else if (count > 1)
    g_string_append_printf (out, "%s%ss %d-%d", out->len > 0 ? ", " : "", what, first,
                            first + count - 1);
}

char *
ks_launch_layout_node (const LaunchRendezvous *rv, int k)
{
  if (rv->nnodes < 2 || rv->hosts == NULL || rv->names == NULL || rv->node_workers == NULL
      || k < 0 || k >= rv->nnodes || rv->hosts[k] == NULL)
    return NULL;
  g_autoptr (GString) what = g_string_new (NULL);
  if (rv->ps)
    {
      append_range (what, "worker", first_on (rv, k, FALSE), rv->node_workers[k]);
      append_range (what, "server", first_on (rv, k, TRUE), rv->node_servers[k]);
    }
  else
    append_range (what, "rank", first_on (rv, k, FALSE), rv->node_workers[k]);
  if (rv->names[k] == NULL || strcmp (rv->names[k], rv->hosts[k]) == 0)
    return g_strdup_printf ("node %d (host %s: %s)", k, rv->hosts[k], what->str);
  return g_strdup_printf ("node %d (host %s, %s: %s)", k, rv->names[k], rv->hosts[k], what->str);
}

char *
ks_launch_layout_describe (const LaunchRendezvous *rv)
{
  g_autofree char *servers = ks_launch_layout_servers (rv);
  GString *out = g_string_new (NULL);
  g_string_printf (out, "servers at %s; ", servers);
  for (int k = 0; k < rv->nnodes; k++)
    {
      g_autofree char *node = ks_launch_layout_node (rv, k);
      g_string_append_printf (out, "%s%s", k > 0 ? ", " : "", node);
    }
  return g_string_free (out, FALSE);
}

void
ks_launch_layout_clear (LaunchRendezvous *rv)
{
  g_clear_pointer (&rv->node_workers, g_free);
  g_clear_pointer (&rv->node_servers, g_free);
  g_clear_pointer (&rv->node_ports, g_strfreev);
}
