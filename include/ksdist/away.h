/* ksdist — whether this process was itself away: stopped (SIGSTOP, a debugger) or starved
 * of CPU.
 *
 * For plugin authors (communicators, modes, servers) whose timeout message must say when
 * this process was the one away.
 *
 * Its peers give up on a process silent past [comm] timeout, and the error it finds when
 * it goes on (a closed connection, a timeout) must say that it was the one away rather
 * than blame them. One watch per process, shared by whoever trains or serves (the
 * trainer's run, the parameter servers' clients and servers), so every message about a
 * gap comes from one record.
 *
 * While at least one user holds it, a thread ticks every 200 ms; a tick, or a question,
 * that comes later than a second past the due tick is a gap. */
#ifndef KSDIST_AWAY_H
#define KSDIST_AWAY_H

#include <glib.h>

G_BEGIN_DECLS

/* Holds the watch (counted: the first begin starts its thread, the last end stops it). */
void ks_away_watch_begin (void);
void ks_away_watch_end (void);

/* All the time this process was away since it started, in microseconds: the difference
 * between two answers is how long it was away between them (0 when it ran). */
gint64 ks_away_total (void);

/* The longest gap lately (a longer one replaces it; any new one does after 60 s) and when
 * it ended (g_get_monotonic_time), in microseconds; FALSE, with zeros, when none. */
gboolean ks_away_last (gint64 *gap, gint64 *at);

/* What every message that says this process was away holds ("this worker was stopped or
 * starved for 4.2 s, ..."): ks_away_explain leaves an error that holds it as it is. */
#define KS_AWAY_SAID "stopped or starved for"

/* A message printed elsewhere (not an error that goes on to ks_away_explain) said that
 * this process was away for the gap that ended at `at` (from ks_away_last or the gap it
 * measured with ks_away_total): ks_away_explain does not say it again. An error that goes
 * on says it with KS_AWAY_SAID instead: another thread's error may be the one reported. */
void ks_away_told (gint64 at);

/* When *error is a lost peer, a timeout or a failed exchange (KS_COMM_ERROR), whichever
 * collective or call met it, and this process was away longer than timeout_s lately, and
 * neither *error (KS_AWAY_SAID) nor a message before said so, prefixes *error with
 * that. */
void ks_away_explain (double timeout_s, GError **error);

G_END_DECLS

#endif
