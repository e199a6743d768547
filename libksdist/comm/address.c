/* Addresses: an address's host, and this host's address on the way to another: the
 * source address the kernel would use to reach it (a UDP connect sends nothing). Loopback jobs stay on 127.0.0.1; where no
 * route is known, the host name. Used where the processes of several hosts meet (ksdist
 * launch --nnodes, srun) to say where this host's peers reach it. */
#include "ks-private.h"

#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

char *
ks_comm_address_host (const char *address, const char **port)
{
  const char *colon = strrchr (address, ':');
  gsize n = colon != NULL ? (gsize) (colon - address) : strlen (address);
  if (port != NULL)
    *port = colon != NULL ? colon + 1 : NULL;
  if (n >= 2 && address[0] == '[' && address[n - 1] == ']')
    return g_strndup (address + 1, n - 2);
  return g_strndup (address, n);
}

char *
ks_comm_address_toward (const char *master)
{
  const char *port;
  g_autofree char *host = ks_comm_address_host (master, &port);
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *found;
  struct sockaddr_storage local;
  socklen_t len = sizeof local;
  char text[INET6_ADDRSTRLEN];
  gboolean ok = FALSE;

  if (getaddrinfo (host, port != NULL ? port : "0", &hints, &found) != 0)
    return g_strdup (g_get_host_name ());
  int fd = socket (found->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && connect (fd, found->ai_addr, found->ai_addrlen) == 0
      && getsockname (fd, (struct sockaddr *) &local, &len) == 0)
    ok = getnameinfo ((struct sockaddr *) &local, len, text, sizeof text, NULL, 0,
                      NI_NUMERICHOST)
         == 0;
  if (fd >= 0)
    close (fd);
  freeaddrinfo (found);
  if (ok && g_str_has_prefix (text, "127."))
    return g_strdup ("127.0.0.1");
  return ok ? g_strdup (text) : g_strdup (g_get_host_name ());
}
