/* test-shm's ranks in the scenarios that kill or fail one of them (shm-faults.c). */
#ifndef KS_TEST_SHM_FAULTS_H
#define KS_TEST_SHM_FAULTS_H

#include "testutil.h"

/* rank0-full: rank 0 sees a /dev/shm of 64 KiB (a tmpfs in a mount namespace of its own;
 * exit 77 where this process may not make one); rank 1 returns once rank 0 has ended. */
void shm_faults_rank0_full (const char *dir, int rank);
/* Rank 0 puts its process id in the store; kill-unmapped and kill-root kill a rank while
 * rank 0's segment has a name. */
void shm_faults_before_connect (KsStore *store, const char *scenario, int rank);
/* Waits (a minute at most) until rank 0's process has ended. */
void shm_faults_wait_rank0_ended (KsStore *store, int rank);
/* die-crowded: the ranks on one CPU with two busy processes that end with rank 0. */
void shm_faults_crowd (int rank);

#endif
