/* Fuzz target: bytes sent to the TCP store's server by a stranger (the corpus holds a
 * hello with the job's token, so mutations also reach the requests behind it). Every
 * 200 inputs a rightful client checks that the server still answers. */
#include "fuzz.h"

#include <arpa/inet.h>
#include <ksdist/ksdist.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TOKEN "fuzz-token"

static KsRegistry *registry;
static KsConfig *config;
static KsStore *server;
static char *address;
static guint64 inputs;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  const char *plugins = g_getenv ("KS_BUILD_PLUGINS");
  g_log_set_default_handler (fuzz_log_handler, NULL);
  if (plugins != NULL)
    {
      g_autofree char *store = g_build_filename (plugins, "store", ".libs", NULL);
      g_setenv ("KS_PLUGIN_PATH", store, TRUE);
      g_setenv ("KS_PLUGIN_SYSTEM_PATH", "", TRUE);
    }
  config = ks_config_new ();
  registry = ks_registry_new ();
  if (!ks_registry_scan (registry, config, NULL)
      || (server = ks_store_new (registry, config, "tcp", NULL)) == NULL
      || !ks_store_serve (server, "127.0.0.1:0", TOKEN, &address, NULL))
    {
      fprintf (stderr, "fuzz-store: no tcp store to fuzz (is KS_BUILD_PLUGINS set?)\n");
      exit (77);
    }
  return 0;
}

/* A rightful client sets and reads a key. */
static void
check_alive (void)
{
  g_autoptr (KsStore) c = ks_store_new (registry, config, "tcp", NULL);
  g_autoptr (GError) error = NULL;
  g_autofree void *value = NULL;
  gsize len;
  if (!ks_store_open (c, address, "alive", TOKEN, &error) || !ks_store_set (c, "k", "v", 1, &error)
      || !ks_store_get (c, "k", 5000, &value, &len, &error) || len != 1)
    {
      fprintf (stderr, "fuzz-store: the server stopped serving: %s\n", error ? error->message : "?");
      abort ();
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct sockaddr_in a = { .sin_family = AF_INET };
  int fd;

  if (server == NULL)
    LLVMFuzzerInitialize (NULL, NULL);
  a.sin_port = htons ((guint16) atoi (strrchr (address, ':') + 1));
  inet_pton (AF_INET, "127.0.0.1", &a.sin_addr);
  if ((fd = socket (AF_INET, SOCK_STREAM, 0)) < 0)
    return 0;
  if (connect (fd, (struct sockaddr *) &a, sizeof a) == 0)
    {
      send (fd, data, size, MSG_NOSIGNAL);
      shutdown (fd, SHUT_WR); /* the server sees the end at once, not after its deadline */
    }
  close (fd);
  if (++inputs % 200 == 0)
    check_alive ();
  return 0;
}
