/* ksdist — the factory of distributed algorithms.
 *
 * For programs that pick a training mode by name without the trainer; trainer.h users need
 * not include it.
 *
 * After OpenKS's KSDistributedFactory.instantiation(flag): a mode name selects the
 * algorithm implementation of that name ("collective", "transpiler", "pslib", or one a
 * third-party plugin provides); the original's integer flag maps non-zero to the
 * GPU/heterogeneous "collective" algorithm and zero to the CPU/general "transpiler". */
#ifndef KSDIST_FACTORY_H
#define KSDIST_FACTORY_H

#include <ksdist/algorithm.h>
#include <ksdist/registry.h>

G_BEGIN_DECLS

/* The modes of the original design, in the order of its constants
 * (TRANSPILER = 1, PSLIB = 2, COLLECTIVE = 3). */
#define KS_MODE_TRANSPILER "transpiler"
#define KS_MODE_PSLIB "pslib"
#define KS_MODE_COLLECTIVE "collective"

const char *ks_factory_mode_for_flag (int flag);

/* Creates the algorithm for `mode` with its plugin's settings from `config`, which must
 * outlive the result. An unknown mode, or one no loaded plugin provides, is an error
 * that lists the modes available. */
KsAlgorithm *ks_factory_instantiate (KsRegistry *registry, const KsConfig *config,
                                     const char *mode, GError **error);
KsAlgorithm *ks_factory_instantiate_flag (KsRegistry *registry, const KsConfig *config, int flag,
                                          GError **error);

G_END_DECLS

#endif
