/* fleetrun's endpoint lists: `ksdist launch --servers IP:PORT,... --workers IP:PORT,...`,
 * the same command on every host, as `fleetrun --servers ... --workers ...` is run.
 *
 * Each distinct IP is a node, numbered in the order the IPs first appear (the servers'
 * list, then the workers'); node 0 serves the job's store at its IP, port 29500 unless
 * --master says otherwise. This machine is the node whose IP is one of its own (a route
 * to it leaves from it), or --node-rank K where several are; it runs the servers and
 * workers listed at that IP, its servers on the ports given. The workers' ports only
 * place them: ksdist's workers listen on none. */
#include "launch.h"

#include <gio/gio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MASTER_PORT 29500

/* Whether IP:PORT is in `ips` and `ports`. */
static gboolean
has_endpoint (GPtrArray *ips, GArray *ports, const char *ip, int port)
{
  for (guint j = 0; j < ips->len; j++)
    if (strcmp (ips->pdata[j], ip) == 0 && g_array_index (ports, int, j) == port)
      return TRUE;
  return FALSE;
}

/* Splits "IP:PORT,..." into `ips` and `ports`; says what is wrong with `option`'s list,
 * also an endpoint already in `other` (the servers' list, when the workers' is split):
 * one endpoint is one process in fleetrun's lists. */
static gboolean
split_list (const char *option, const char *text, GPtrArray *ips, GArray *ports,
            GPtrArray *other_ips, GArray *other_ports, GError **error)
{
  g_auto (GStrv) items = g_strsplit (text, ",", -1);
  for (int i = 0; items[i] != NULL; i++)
    {
      const char *port_text;
      g_autofree char *host = ks_comm_address_host (items[i], &port_text);
      gint64 port = 0;
      g_autoptr (GInetAddress) ip = port_text != NULL ? g_inet_address_new_from_string (host) : NULL;
      if (ip == NULL || !g_ascii_string_to_signed (port_text, 10, 1, 65535, &port, NULL))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s %s: item %d '%s' is not IP:PORT (an IP address, as fleetrun takes, "
                       "and a port 1 to 65535)",
                       option, text, i + 1, items[i]);
          return FALSE;
        }
      char *canonical = g_inet_address_to_string (ip);
      if (has_endpoint (ips, ports, canonical, (int) port))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s: the endpoint %s is listed twice: give each process its own "
                       "port",
                       option, items[i]);
          g_free (canonical);
          return FALSE;
        }
      if (other_ips != NULL && has_endpoint (other_ips, other_ports, canonical, (int) port))
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "%s: the endpoint %s is also in --servers: a server and a worker "
                       "cannot be one process; give the worker another port",
                       option, items[i]);
          g_free (canonical);
          return FALSE;
        }
      g_ptr_array_add (ips, canonical);
      int p = (int) port;
      g_array_append_val (ports, p);
    }
  return TRUE;
}

static int
index_of (GPtrArray *nodes, const char *ip)
{
  for (guint k = 0; k < nodes->len; k++)
    if (strcmp (nodes->pdata[k], ip) == 0)
      return (int) k;
  return -1;
}

/* Whether `ip` is one of this machine's addresses: the route to it leaves from it. */
static gboolean
is_mine (const char *ip)
{
  g_autofree char *target = g_strdup_printf (strchr (ip, ':') ? "[%s]:1" : "%s:1", ip);
  g_autofree char *from = ks_comm_address_toward (target);
  return strcmp (from, ip) == 0 || (g_str_has_prefix (ip, "127.") && strcmp (from, "127.0.0.1") == 0);
}

gboolean
ks_launch_endpoints (LaunchEndpoints *e, const char *servers, const char *workers,
                     GError **error)
{
  g_autoptr (GPtrArray) server_ips = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) worker_ips = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GArray) server_ports = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GArray) worker_ports = g_array_new (FALSE, FALSE, sizeof (int));

  if (!split_list ("--servers", servers, server_ips, server_ports, NULL, NULL, error)
      || !split_list ("--workers", workers, worker_ips, worker_ports, server_ips, server_ports,
                      error))
    return FALSE;
  for (guint i = 0; i < server_ips->len + worker_ips->len; i++)
    {
      const char *ip = i < server_ips->len ? server_ips->pdata[i]
                                           : worker_ips->pdata[i - server_ips->len];
      if (index_of (nodes, ip) < 0)
        g_ptr_array_add (nodes, g_strdup (ip));
    }
  if (e->nnodes > 1 && e->nnodes != (int) nodes->len)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "--nnodes %d, but the endpoint lists name %u hosts (one node per IP): "
                   "leave --nnodes out",
                   e->nnodes, nodes->len);
      return FALSE;
    }
  e->nnodes = (int) nodes->len;
  if (e->node_rank < 0)
    {
      GString *mine = g_string_new (NULL);
      for (guint k = 0; k < nodes->len; k++)
        if (is_mine (nodes->pdata[k]))
          {
            g_string_append_printf (mine, "%s%s", mine->len > 0 ? ", " : "",
                                    (char *) nodes->pdata[k]);
            e->node_rank = e->node_rank < 0 ? (int) k : -2;
          }
      g_autofree char *found = g_string_free (mine, FALSE);
      if (e->node_rank == -1)
        {
          g_autofree char *here = ks_comm_address_toward (nodes->pdata[0]);
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "none of the hosts in --servers and --workers is this machine (it "
                       "reaches %s from %s): run the command on each host listed, or give "
                       "--node-rank K (K: the host's place among the IPs in order of "
                       "appearance, servers first)",
                       (char *) nodes->pdata[0], here);
          return FALSE;
        }
      if (e->node_rank == -2)
        {
          g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                       "several hosts in --servers and --workers are this machine's (%s): "
                       "give --node-rank K on each (K: the host's place among the IPs in "
                       "order of appearance, servers first)",
                       found);
          return FALSE;
        }
    }
  if (e->node_rank >= e->nnodes)
    {
      g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                   "--node-rank %d, but the endpoint lists name %d hosts: give 0 to %d",
                   e->node_rank, e->nnodes, e->nnodes - 1);
      return FALSE;
    }
  const char *ip = nodes->pdata[e->node_rank];
  e->host = g_strdup (ip);
  e->servers = e->workers = 0;
  GString *ports = g_string_new (NULL);
  for (guint i = 0; i < server_ips->len; i++)
    if (strcmp (server_ips->pdata[i], ip) == 0)
      g_string_append_printf (ports, "%s%d", e->servers++ > 0 ? "," : "",
                              g_array_index (server_ports, int, i));
  for (guint i = 0; i < worker_ips->len; i++)
    e->workers += strcmp (worker_ips->pdata[i], ip) == 0;
  e->ports = g_string_free (ports, FALSE);
  if (e->master == NULL && e->nnodes > 1)
    {
      const char *first = nodes->pdata[0];
      for (guint i = 0; i < server_ips->len; i++)
        if (strcmp (server_ips->pdata[i], first) == 0
            && g_array_index (server_ports, int, i) == DEFAULT_MASTER_PORT)
          {
            g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                         "--servers: %s:%d is where node 0 serves the job's store: give that "
                         "server another port, or the store another with --master %s:PORT",
                         first, DEFAULT_MASTER_PORT, first);
            return FALSE;
          }
      e->master = g_strdup_printf (strchr (first, ':') ? "[%s]:%d" : "%s:%d", first,
                                   DEFAULT_MASTER_PORT);
    }
  return TRUE;
}
