/* The Gloo communicator: collectives over TCP between the ranks of a job.
 *
 * Two Gloo contexts per communicator, so the older algorithm classes and the newer
 * unbound-buffer API never share slots (sharing made one of them ~100x slower in a probe
 * here): `algo` runs allreduce, broadcast and barrier with the algorithm classes;
 * `p2p` runs send/recv, allgather and allgatherv with unbound buffers.
 *
 * An algorithm object binds its buffers and takes slots when it is made, so objects are
 * cached by what every rank asks for alike (operation, type, count, algorithm), never by
 * a pointer that may differ between ranks; each owns a staging buffer the caller's data
 * is copied through. Every C++ exception is caught here and becomes a GError. */
#include <config.h>
#include <ksdist/ksdist.h>

#include "choose.h"

#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdarg>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

/* A failure with a KsCommError code, thrown inside this file only. */
struct CommFailure : std::runtime_error {
  int code;
  CommFailure (int c, const std::string &message) : std::runtime_error (message), code (c) {}
};

[[noreturn]] void
throw_gerror (GError *e)
{
  int code = e->domain == KS_COMM_ERROR ? e->code : KS_COMM_ERROR_FAILED;
  std::string message = e->message;
  g_error_free (e);
  throw CommFailure (code, message);
}

/* Gloo's rendezvous over the job's ksdist store. */
struct StoreAdapter : gloo::rendezvous::Store {
  const KsStoreOps *ops;
  void *ctx;
  int timeout_ms;
  gint64 deadline = -1; /* while joining: the join's, so that its waits add up to timeout_ms */

  StoreAdapter (const KsStoreOps *o, void *c, int t) : ops (o), ctx (c), timeout_ms (t) {}

  int
  left (int ms) const
  {
    if (deadline < 0)
      return ms;
    return (int) MAX (0, MIN ((gint64) ms, (deadline - g_get_monotonic_time ()) / 1000));
  }

  void
  set (const std::string &key, const std::vector<char> &data) override
  {
    GError *e = NULL;
    if (!ops->set (ctx, key.c_str (), data.data (), data.size (), &e))
      throw_gerror (e);
  }

  std::vector<char>
  get (const std::string &key) override
  {
    GError *e = NULL;
    void *data = NULL;
    gsize len = 0;
    if (!ops->get (ctx, key.c_str (), left (timeout_ms), &data, &len, &e))
      throw_gerror (e);
    std::vector<char> out ((char *) data, (char *) data + len);
    g_free (data);
    return out;
  }

  void
  wait (const std::vector<std::string> &keys) override
  {
    wait (keys, std::chrono::milliseconds (timeout_ms));
  }

  void
  wait (const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override
  {
    for (const auto &key : keys)
      {
        GError *e = NULL;
        void *data = NULL;
        gsize len = 0;
        if (!ops->get (ctx, key.c_str (), left ((int) MIN (timeout.count (), G_MAXINT)), &data,
                       &len, &e))
          throw_gerror (e);
        g_free (data);
      }
  }
};

/* A cached algorithm object with the buffers it was made on. */
struct Entry {
  std::vector<char> in;
  std::unique_ptr<gloo::Algorithm> algorithm;
};

struct Settings {
  std::string algorithm, hostname, iface;
  gint64 auto_small_bytes, auto_hosts_ring_bytes;
};

struct Gloo {
  Settings settings;
  std::shared_ptr<StoreAdapter> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> algo, p2p;
  std::unique_ptr<gloo::Algorithm> barrier;
  std::map<std::string, std::unique_ptr<Entry>> cache;
  std::string group; /* store prefix of this communicator */
  int rank = 0, size = 1, timeout_ms = 0;
  bool several_hosts = false; /* some member runs on another host than this rank */
  std::map<std::string, int> subgroups; /* a rank list -> how many groups of it were made */
  guint32 next_tag = 0; /* of allgather(v), the same sequence on every rank */
};


/* printf into a std::string */
std::string
format (const char *fmt, ...) G_GNUC_PRINTF (1, 2);
std::string
format (const char *fmt, ...)
{
  va_list args;
  va_start (args, fmt);
  g_autofree char *text = g_strdup_vprintf (fmt, args);
  va_end (args);
  return text;
}

/* Runs `body`, turning any exception into a GError that names the operation. `describe`
 * says what the operation was; it runs only on failure, keeping formatting off the
 * path of every call. */
template <typename D, typename F>
gboolean
guarded (Gloo *g, D describe, GError **error, F body)
{
  int code = KS_COMM_ERROR_FAILED;
  std::string message;
  try
    {
      body ();
      return TRUE;
    }
  catch (const CommFailure &e)
    {
      code = e.code;
      message = e.what ();
    }
  catch (const gloo::IoException &e)
    {
      message = e.what ();
      code = message.find ("imed out") != std::string::npos || message.find ("imeout") != std::string::npos
                 ? KS_COMM_ERROR_TIMEOUT
                 : KS_COMM_ERROR_PEER_LOST;
    }
  catch (const std::exception &e)
    {
      message = e.what ();
    }
  catch (...)
    {
      message = "an unknown C++ exception";
    }
  g_set_error (error, KS_COMM_ERROR, code, "gloo: %s on rank %d of %d: %s",
               describe ().c_str (), g->rank, g->size, message.c_str ());
  return FALSE;
}

void *
gloo_create (const KsSettings *s, GError **error)
{
  Gloo *g = new Gloo ();
  g->settings.algorithm = ks_settings_get_string (s, "algorithm");
  g->settings.hostname = ks_settings_get_string (s, "hostname");
  g->settings.iface = ks_settings_get_string (s, "iface");
  g->settings.auto_small_bytes = ks_settings_get_int (s, "auto_small_bytes");
  g->settings.auto_hosts_ring_bytes = ks_settings_get_int (s, "auto_hosts_ring_bytes");
  return g;
}

void
gloo_destroy (void *p)
{
  delete (Gloo *) p;
}

/* Waits until every rank has said it is here, so that a missing rank is named before
 * Gloo's own connect (which would only time out on the first one it waits for). Each
 * rank's key is waited for with the time left, in the store (one query a look, on the
 * store's one connection); a store that fails says so at once. */
/* This host, as the shm plugin tells hosts apart: the boot id tells hosts of one name
 * apart, the name (a UTS namespace) the hosts of tools/cluster.sh that share a kernel. */
std::string
host_id ()
{
  g_autofree char *boot = NULL;
  g_file_get_contents ("/proc/sys/kernel/random/boot_id", &boot, NULL, NULL);
  return format ("%s %s", g_get_host_name (), boot != NULL ? g_strstrip (boot) : "");
}

/* Each rank says it is here with its host, so that `auto` knows whether the members
 * span several hosts (no further round trip). */
void
arrive (Gloo *g)
{
  const KsStoreOps *ops = g->store->ops;
  std::string here = g->group + "/arrived/";
  std::string host = host_id ();
  gint64 deadline = g_get_monotonic_time () + (gint64) g->timeout_ms * 1000;
  GError *e = NULL;

  g->several_hosts = false;
  if (!ops->set (g->store->ctx, (here + std::to_string (g->rank)).c_str (), host.data (),
                 host.size (), &e))
    throw_gerror (e);
  for (int r = 0; r < g->size; r++)
    {
      void *data = NULL;
      gsize len;
      int left = (int) MAX (0, (deadline - g_get_monotonic_time ()) / 1000);
      if (r == g->rank)
        continue;
      if (ops->get (g->store->ctx, (here + std::to_string (r)).c_str (), left, &data, &len, &e))
        {
          if (host != std::string ((const char *) data, len))
            g->several_hosts = true;
          g_free (data);
          continue;
        }
      if (!g_error_matches (e, KS_COMM_ERROR, KS_COMM_ERROR_TIMEOUT))
        throw_gerror (e);
      g_clear_error (&e);
      /* r is missing: which others are, at one look each */
      std::string missing = std::to_string (r);
      for (int o = r + 1; o < g->size; o++)
        {
          if (o == g->rank)
            continue;
          if (ops->get (g->store->ctx, (here + std::to_string (o)).c_str (), 0, &data, &len, NULL))
            g_free (data);
          else
            missing += ", " + std::to_string (o);
        }
      throw CommFailure (KS_COMM_ERROR_TIMEOUT,
                         "rank " + missing + " did not join within "
                             + std::to_string (g->timeout_ms)
                             + " ms; check that every rank was started with the same store "
                               "and job, and look at the log of the missing one");
    }
}

/* The algorithm for a message: the configured one, or what `auto` takes for its size
 * and whether the members span hosts (choose.c says why). */
KsGlooAuto
auto_of (const Gloo *g)
{
  return { g->settings.auto_small_bytes, g->settings.auto_hosts_ring_bytes, g->several_hosts,
           g->size };
}

std::string
choose (Gloo *g, gsize bytes)
{
  KsGlooAuto a = auto_of (g);
  return ks_gloo_choose (g->settings.algorithm.c_str (), &a, bytes);
}

/* Says once per communicator (its rank 0) what `auto` takes, so a job's log shows the
 * allreduce it runs across hosts. */
void
tell_choice (const Gloo *g)
{
  if (g->rank != 0 || g->size < 2 || g->settings.algorithm != "auto")
    return;
  KsGlooAuto a = auto_of (g);
  g_autofree char *rule = ks_gloo_auto_describe (&a);
  /* info across hosts, where the choice matters for the link; debug on one */
  g_log (G_LOG_DOMAIN, g->several_hosts ? G_LOG_LEVEL_INFO : G_LOG_LEVEL_DEBUG,
         "gloo: %d ranks on %s: allreduce `auto` takes %s", g->size,
         g->several_hosts ? "several hosts" : "one host", rule);
}

std::shared_ptr<gloo::rendezvous::Context>
mesh (Gloo *g, const char *name)
{
  auto ctx = std::make_shared<gloo::rendezvous::Context> (g->rank, g->size);
  gloo::rendezvous::PrefixStore prefixed (g->group + "/" + name, *g->store);
  ctx->setTimeout (std::chrono::milliseconds (g->timeout_ms));
  ctx->connectFullMesh (prefixed, g->device);
  return ctx;
}

/* Every rank arrives, then Gloo's two meshes connect through the store: all of it within
 * one timeout. (Gloo's own wait for a pair to connect is five of its timeouts.) */
void
join (Gloo *g)
{
  struct Within {
    StoreAdapter *store;
    ~Within () { store->deadline = -1; }
  } within { g->store.get () };
  g->store->deadline = g_get_monotonic_time () + (gint64) g->timeout_ms * 1000;
  arrive (g);
  tell_choice (g);
  g->algo = mesh (g, "algo");
  g->p2p = mesh (g, "p2p");
  g->barrier.reset (new gloo::BarrierAllToAll (g->algo));
}

gboolean
gloo_connect (void *p, const KsStoreOps *store_ops, void *store, int rank, int size,
              int timeout_ms, GError **error)
{
  Gloo *g = (Gloo *) p;
  g->rank = rank;
  g->size = size;
  g->timeout_ms = timeout_ms;
  g->group = "ks/gloo";
  return guarded (g, [] { return std::string ("connect"); }, error, [&] {
    gloo::transport::tcp::attr attr;
    if (!g->settings.iface.empty ())
      attr.iface = g->settings.iface;
    else
      attr.hostname = g->settings.hostname;
    g->store = std::make_shared<StoreAdapter> (store_ops, store, timeout_ms);
    g->device = gloo::transport::tcp::CreateDevice (attr);
    join (g);
  });
}

/* ---- allreduce ---- */

template <typename T>
const gloo::ReductionFunction<T> *
reduction (KsReduceOp op)
{
  switch (op)
    {
    case KS_REDUCE_MIN:
      return gloo::ReductionFunction<T>::min;
    case KS_REDUCE_MAX:
      return gloo::ReductionFunction<T>::max;
    case KS_REDUCE_PROD:
      return gloo::ReductionFunction<T>::product;
    default: /* sum, and avg = sum then divide */
      return gloo::ReductionFunction<T>::sum;
    }
}

template <typename T>
gloo::Algorithm *
make_allreduce (Gloo *g, const std::string &name, T *ptr, int count, KsReduceOp op)
{
  std::vector<T *> ptrs{ ptr };
  auto fn = reduction<T> (op);
  if (name == "ring")
    return new gloo::AllreduceRing<T> (g->algo, ptrs, count, fn);
  if (name == "ring_chunked")
    return new gloo::AllreduceRingChunked<T> (g->algo, ptrs, count, fn);
  if (name == "halving_doubling")
    return new gloo::AllreduceHalvingDoubling<T> (g->algo, ptrs, count, fn);
  return new gloo::AllreduceBcube<T> (g->algo, ptrs, count, fn);
}

/* One of gloo/math.h's reductions in the shape the newer API takes. */
template <typename T>
gloo::AllreduceOptions::Func
unbound_fn (void (*fn) (void *, const void *, const void *, size_t))
{
  return fn;
}

/* Gloo's newer allreduce on the p2p context, straight on the caller's buffer: no
 * staging copies. */
template <typename T>
void
allreduce_unbound (Gloo *g, T *buf, gsize count, KsReduceOp op)
{
  gloo::AllreduceOptions opts (g->p2p);
  opts.setOutput<T> (buf, count);
  opts.setAlgorithm (gloo::AllreduceOptions::Algorithm::RING);
  switch (op)
    {
    case KS_REDUCE_MIN:
      opts.setReduceFunction (unbound_fn<T> (gloo::min<T>));
      break;
    case KS_REDUCE_MAX:
      opts.setReduceFunction (unbound_fn<T> (gloo::max<T>));
      break;
    case KS_REDUCE_PROD:
      opts.setReduceFunction (unbound_fn<T> (gloo::product<T>));
      break;
    default:
      opts.setReduceFunction (unbound_fn<T> (gloo::sum<T>));
      break;
    }
  opts.setTag (g->next_tag++);
  opts.setTimeout (std::chrono::milliseconds (g->timeout_ms));
  gloo::allreduce (opts);
}

template <typename T>
void
allreduce_typed (Gloo *g, T *buf, gsize count, KsDType dtype, KsReduceOp op)
{
  gsize bytes = count * sizeof (T);
  std::string name = choose (g, bytes);
  if (name == "unbound")
    allreduce_unbound (g, buf, count, op);
  else
    {
      std::string key = "allreduce/" + name + "/" + ks_dtype_name (dtype) + "/"
                        + ks_reduce_op_name (op) + "/" + std::to_string (count);
      auto &entry = g->cache[key];
      if (!entry)
        {
          entry.reset (new Entry ());
          entry->in.resize (bytes);
          entry->algorithm.reset (
              make_allreduce<T> (g, name, (T *) entry->in.data (), (int) count, op));
        }
      memcpy (entry->in.data (), buf, bytes);
      entry->algorithm->run ();
      memcpy (buf, entry->in.data (), bytes);
    }
  if (op == KS_REDUCE_AVG)
    for (gsize i = 0; i < count; i++)
      buf[i] /= g->size;
}

gboolean
check_count (Gloo *g, const char *what, gsize count, KsDType dtype, gboolean reduce,
             GError **error)
{
  gboolean typed = dtype == KS_DTYPE_FLOAT32 || dtype == KS_DTYPE_FLOAT64
                   || dtype == KS_DTYPE_INT32 || dtype == KS_DTYPE_INT64;
  if (reduce && !typed)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "gloo: %s of %s is not supported; use float32, float64, int32 or int64", what,
                   ks_dtype_name (dtype));
      return FALSE;
    }
  if (count * ks_dtype_size (dtype) > INT_MAX)
    {
      g_set_error (error, KS_COMM_ERROR, KS_COMM_ERROR_INVALID,
                   "gloo: %s of %" G_GSIZE_FORMAT " %s is over Gloo's 2 GiB per call; split it",
                   what, count, ks_dtype_name (dtype));
      return FALSE;
    }
  return TRUE;
}

gboolean
gloo_allreduce (void *p, void *buf, gsize count, KsDType dtype, KsReduceOp op, GError **error)
{
  Gloo *g = (Gloo *) p;
  if (!check_count (g, "allreduce", count, dtype, TRUE, error))
    return FALSE;
  if (g->size == 1 || count == 0)
    return TRUE;
  auto what = [&] { return format ("allreduce (%s, %" G_GSIZE_FORMAT " %s, %s)",
                                           choose (g, count * ks_dtype_size (dtype)).c_str (),
                                           count, ks_dtype_name (dtype), ks_reduce_op_name (op)); };
  return guarded (g, what, error, [&] {
    switch (dtype)
      {
      case KS_DTYPE_FLOAT32:
        allreduce_typed (g, (float *) buf, count, dtype, op);
        break;
      case KS_DTYPE_FLOAT64:
        allreduce_typed (g, (double *) buf, count, dtype, op);
        break;
      case KS_DTYPE_INT32:
        allreduce_typed (g, (gint32 *) buf, count, dtype, op);
        break;
      default:
        allreduce_typed (g, (gint64 *) buf, count, dtype, op);
        break;
      }
  });
}

/* ---- broadcast, allgather, barrier: bytes, any type ---- */

gboolean
gloo_broadcast (void *p, void *buf, gsize count, KsDType dtype, int root, GError **error)
{
  Gloo *g = (Gloo *) p;
  gsize bytes = count * ks_dtype_size (dtype);
  if (!check_count (g, "broadcast", count, dtype, FALSE, error))
    return FALSE;
  if (g->size == 1 || bytes == 0)
    return TRUE;
  auto what = [&] { return format ("broadcast (%" G_GSIZE_FORMAT " bytes from rank %d)",
                                           bytes, root); };
  return guarded (g, what, error, [&] {
    auto &entry = g->cache["broadcast/" + std::to_string (root) + "/" + std::to_string (bytes)];
    if (!entry)
      {
        entry.reset (new Entry ());
        entry->in.resize (bytes);
        std::vector<char *> ptrs{ entry->in.data () };
        entry->algorithm.reset (new gloo::BroadcastOneToAll<char> (g->algo, ptrs, bytes, root));
      }
    if (g->rank == root)
      memcpy (entry->in.data (), buf, bytes);
    entry->algorithm->run ();
    if (g->rank != root)
      memcpy (buf, entry->in.data (), bytes);
  });
}

gboolean
gloo_allgather (void *p, const void *send, void *recv, gsize count, KsDType dtype,
                GError **error)
{
  Gloo *g = (Gloo *) p;
  gsize bytes = count * ks_dtype_size (dtype);
  if (!check_count (g, "allgather", count * g->size, dtype, FALSE, error))
    return FALSE;
  if (g->size == 1 || bytes == 0)
    {
      memmove (recv, send, bytes);
      return TRUE;
    }
  /* unbound buffers: Gloo's AllgatherRing writes into the result buffer it is bound to,
   * so a fast rank's next allgather could land there before this one was copied out */
  auto what = [&] { return format ("allgather (%" G_GSIZE_FORMAT " bytes per rank)", bytes); };
  return guarded (g, what, error, [&] {
    gloo::AllgatherOptions opts (g->p2p);
    opts.setInput<char> ((char *) send, bytes);
    opts.setOutput<char> ((char *) recv, bytes * g->size);
    opts.setTag (g->next_tag++);
    opts.setTimeout (std::chrono::milliseconds (g->timeout_ms));
    gloo::allgather (opts);
  });
}

gboolean
gloo_barrier (void *p, GError **error)
{
  Gloo *g = (Gloo *) p;
  if (g->size == 1)
    return TRUE;
  return guarded (g, [] { return std::string ("barrier"); }, error, [&] { g->barrier->run (); });
}

/* ---- unbound buffers: allgatherv, reduce-scatter, send/recv ---- */

gboolean
gloo_allgatherv (void *p, const void *send, void *recv, const gsize *counts, KsDType dtype,
                 GError **error)
{
  Gloo *g = (Gloo *) p;
  gsize esize = ks_dtype_size (dtype), total = 0;
  std::vector<size_t> bytes (g->size);
  for (int r = 0; r < g->size; r++)
    total += counts[r];
  if (!check_count (g, "allgatherv", total, dtype, FALSE, error))
    return FALSE;
  for (int r = 0; r < g->size; r++)
    bytes[r] = counts[r] * esize;
  return guarded (g, [] { return std::string ("allgatherv"); }, error, [&] {
    gloo::AllgathervOptions opts (g->p2p);
    opts.setInput<char> ((char *) send, bytes[g->rank]);
    opts.setOutput<char> ((char *) recv, bytes);
    opts.setTag (g->next_tag++);
    opts.setTimeout (std::chrono::milliseconds (g->timeout_ms));
    gloo::allgatherv (opts);
  });
}

/* An allreduce of the whole input, then each rank keeps its block: the bandwidth of one
 * allreduce rather than half of it, but the fastest algorithms Gloo has. */
gboolean
gloo_reduce_scatter (void *p, const void *send, void *recv, gsize recv_count, KsDType dtype,
                     KsReduceOp op, GError **error)
{
  Gloo *g = (Gloo *) p;
  gsize block = recv_count * ks_dtype_size (dtype);
  std::vector<char> all ((const char *) send, (const char *) send + block * g->size);
  if (!gloo_allreduce (p, all.data (), recv_count * g->size, dtype, op, error))
    return FALSE;
  memcpy (recv, all.data () + block * g->rank, block);
  return TRUE;
}

/* User tags live above bit 40, away from the slots of Gloo's own collectives. */
guint64
user_slot (guint32 tag)
{
  return (G_GUINT64_CONSTANT (1) << 40) | tag;
}

/* A send or receive under way: the unbound buffer over the caller's memory. */
struct Request
{
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  bool sending;
  int peer;
  guint32 tag;
  gsize nbytes;
};

std::string
describe (const Request &r)
{
  return format (r.sending ? "send of %" G_GSIZE_FORMAT " bytes to rank %d (tag %u)"
                           : "receive of %" G_GSIZE_FORMAT " bytes from rank %d (tag %u)",
                 r.nbytes, r.peer, r.tag);
}

Request *
start (Gloo *g, void *buf, gsize nbytes, int peer, guint32 tag, bool sending, GError **error)
{
  auto *r = new Request{ nullptr, sending, peer, tag, nbytes };
  if (!guarded (g, [&] { return describe (*r); }, error, [&] {
        r->buffer = g->p2p->createUnboundBuffer (buf, nbytes);
        if (sending)
          r->buffer->send (peer, user_slot (tag));
        else
          r->buffer->recv (peer, user_slot (tag));
      }))
    {
      delete r;
      return nullptr;
    }
  return r;
}

void *
gloo_isend (void *p, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  return start ((Gloo *) p, (void *) buf, nbytes, peer, tag, true, error);
}

void *
gloo_irecv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  return start ((Gloo *) p, buf, nbytes, peer, tag, false, error);
}

gboolean
gloo_wait (void *p, void *request, GError **error)
{
  Gloo *g = (Gloo *) p;
  std::unique_ptr<Request> r ((Request *) request);
  auto timeout = std::chrono::milliseconds (g->timeout_ms);
  return guarded (g, [&] { return describe (*r); }, error, [&] {
    if (r->sending ? !r->buffer->waitSend (timeout) : !r->buffer->waitRecv (timeout))
      throw CommFailure (KS_COMM_ERROR_TIMEOUT,
                         "rank " + std::to_string (r->peer)
                             + (r->sending ? " did not take the message within "
                                           : " sent nothing within ")
                             + std::to_string (g->timeout_ms) + " ms");
  });
}

gboolean
gloo_send (void *p, const void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  void *r = gloo_isend (p, buf, nbytes, peer, tag, error);
  return r != NULL && gloo_wait (p, r, error);
}

gboolean
gloo_recv (void *p, void *buf, gsize nbytes, int peer, guint32 tag, GError **error)
{
  void *r = gloo_irecv (p, buf, nbytes, peer, tag, error);
  return r != NULL && gloo_wait (p, r, error);
}

/* ---- sub-groups ---- */

void *
gloo_subgroup (void *p, const int *ranks, int n_ranks, GError **error)
{
  Gloo *g = (Gloo *) p;
  std::string members;
  int index = -1;
  for (int i = 0; i < n_ranks; i++)
    {
      members += (i > 0 ? "," : "") + std::to_string (ranks[i]);
      if (ranks[i] == g->rank)
        index = i;
    }
  /* the members count the groups of their list alike (the other ranks need not take
   * part), so the prefix is the same on every member */
  Gloo *sub = new Gloo ();
  sub->settings = g->settings;
  sub->store = g->store;
  sub->device = g->device;
  sub->rank = index;
  sub->size = n_ranks;
  sub->timeout_ms = g->timeout_ms;
  sub->group = g->group + "/sub" + std::to_string (g->subgroups[members]++) + "/" + members;
  auto what = [&] { return format ("sub-group {%s}", members.c_str ()); };
  if (!guarded (g, what, error, [&] { join (sub); }))
    {
      delete sub;
      return NULL;
    }
  return sub;
}

/* Later point-to-point, allgather and unbound operations wait this long; the algorithm
 * classes (allreduce, broadcast, barrier) keep the timeout their pairs connected with. */
gboolean
gloo_set_timeout (void *p, int timeout_ms, GError **error)
{
  Gloo *g = (Gloo *) p;
  g->timeout_ms = timeout_ms;
  for (auto *ctx : { &g->algo, &g->p2p })
    if (*ctx)
      (*ctx)->setTimeout (std::chrono::milliseconds (timeout_ms));
  return TRUE;
}

int
gloo_rank (void *p)
{
  return ((Gloo *) p)->rank;
}

int
gloo_size (void *p)
{
  return ((Gloo *) p)->size;
}

KsCommOps
make_ops ()
{
  KsCommOps ops = {};
  ops.size = sizeof (KsCommOps);
  ops.create = gloo_create;
  ops.destroy = gloo_destroy;
  ops.connect = gloo_connect;
  ops.allreduce = gloo_allreduce;
  ops.broadcast = gloo_broadcast;
  ops.barrier = gloo_barrier;
  ops.allgather = gloo_allgather;
  ops.allgatherv = gloo_allgatherv;
  ops.reduce_scatter = gloo_reduce_scatter;
  ops.send = gloo_send;
  ops.recv = gloo_recv;
  ops.isend = gloo_isend;
  ops.irecv = gloo_irecv;
  ops.wait = gloo_wait;
  ops.subgroup = gloo_subgroup;
  ops.set_timeout = gloo_set_timeout;
  ops.rank = gloo_rank;
  ops.world_size = gloo_size;
  ops.traits = 0; /* host memory, ranks on any host */
  return ops;
}

const KsCommOps gloo_ops = make_ops ();

/* Above shm (0): `auto` means Gloo, which joins ranks on any hosts; shared memory is
 * chosen by name, by a caller that knows every rank is on this host. */
int
gloo_query (char **reason)
{
  return 1;
}

const KsImplDesc gloo_impls[] = {
  { KS_KIND_COMM, "gloo", &gloo_ops, gloo_query, "Collectives over TCP with Gloo (CPU memory); what auto takes when the ranks are on "
    "several hosts, or not known to share one" },
};

const KsKeyDesc gloo_settings[] = {
  { NULL, "algorithm", KS_VALUE_CHOICE, "auto", 1, 0,
    "auto|ring|ring_chunked|halving_doubling|bcube|unbound",
    "Allreduce algorithm; auto picks by message size and whether the ranks span hosts" },
  { NULL, "auto_small_bytes", KS_VALUE_INT, "1048576", 0, 1e12, NULL,
    "auto: messages of this many bytes and more use halving-doubling on one host, ring_chunked across hosts; smaller ones the ring (or see auto_hosts_ring_bytes)" },
  { NULL, "auto_hosts_ring_bytes", KS_VALUE_INT, "131072", 0, 1e12, NULL,
    "auto, more than 2 ranks on several hosts: messages from this many bytes up to auto_small_bytes use halving-doubling, smaller ones the ring" },
  { NULL, "hostname", KS_VALUE_STRING, "127.0.0.1", 0, 0, NULL,
    "Address this rank listens on; 127.0.0.1 keeps a one-machine job off the network" },
  { NULL, "iface", KS_VALUE_STRING, "", 0, 0, NULL,
    "Network interface to listen on (overrides hostname), e.g. eth0" },
};

/* auto_small_bytes and auto_hosts_ring_bytes only tune `auto`: set beside another
 * algorithm they would change nothing, silently. */
gboolean
gloo_check_settings (const KsSettings *s, GError **error)
{
  const char *algorithm = ks_settings_get_string (s, "algorithm");
  if (strcmp (algorithm, "auto") == 0)
    return TRUE;
  for (const char *key : { "auto_small_bytes", "auto_hosts_ring_bytes" })
    if (ks_settings_is_set (s, key))
      {
        g_set_error (error, KS_CONFIG_ERROR, KS_CONFIG_ERROR_BAD_VALUE,
                     "[gloo] %s is set, but [gloo] algorithm = %s does not read it (only auto "
                     "chooses by size): remove %s, or set algorithm = auto",
                     key, algorithm, key);
        return FALSE;
      }
  return TRUE;
}

const KsPluginDesc gloo_plugin = {
  KS_ABI_MAJOR,
  KS_ABI_MINOR,
  "gloo",
  PACKAGE_VERSION,
  "Gloo communicator: allreduce, broadcast, allgather(v), reduce-scatter, barrier, send/recv",
  gloo_impls,
  G_N_ELEMENTS (gloo_impls),
  gloo_settings,
  G_N_ELEMENTS (gloo_settings),
  gloo_check_settings,
};

} // namespace

extern "C" KS_EXPORT const KsPluginDesc *ks_plugin_descriptor (void);

extern "C" const KsPluginDesc *
ks_plugin_descriptor (void)
{
  return &gloo_plugin;
}
