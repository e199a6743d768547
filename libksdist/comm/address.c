/* This host's address on the way to another: the source address the kernel would use
 * to reach it (a UDP connect sends nothing). Loopback jobs stay on 127.0.0.1; where no
 * route is known, the host name. Used where the processes of several hosts meet (ksdist
 * launch --nnodes, srun) to say where this host's peers reach it. */
#include "ks-private.h"

#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

char *
ks_comm_address_toward (const char *master)
{
  const char *colon = strrchr (master, ':');
  g_autofree char *host = g_strndup (master, colon != NULL ? (gsize) (colon - master)
                                                           : strlen (master));
  struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM }, *found;
  struct sockaddr_storage local;
  socklen_t len = sizeof local;
  char text[INET6_ADDRSTRLEN];
  gboolean ok = FALSE;

  if (host[0] == '[' && host[strlen (host) - 1] == ']')
    {
      memmove (host, host + 1, strlen (host) - 2);
      host[strlen (host) - 2] = '\0';
    }
  if (getaddrinfo (host, colon != NULL ? colon + 1 : "0", &hints, &found) != 0)
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
