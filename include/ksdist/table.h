/* ksdist — table: a user's own data set from a standard file (CSV or TSV, NumPy .npy,
 * MNIST's IDX, a folder of PNG and JPEG images per class, llm.c/nanoGPT token shards),
 * loaded whole into memory.
 *
 * For programs using the tasks library (libksdist-tasks) to read their own data files; not
 * part of the core.
 *
 * Every reader treats the file as untrusted: sizes, ranges and counts are checked before
 * use, and a malformed file is one error naming the file and the line, record or
 * element and what was expected: KS_CONFIG_ERROR_IO for a file that is missing or cannot
 * be read (a path to change), KS_COMPUTE_ERROR_INVALID for a malformed one or bad options
 * (bad data: ksdist exits 1 for it, as for every data error). A file whose first bytes are
 * gzip's magic is decompressed as it is read, whatever its name (token files excepted:
 * they are memory-mapped). */
#ifndef KSDIST_TABLE_H
#define KSDIST_TABLE_H

#include <ksdist/types.h>

G_BEGIN_DECLS

/* Labels of a classification table are class ids below this: a larger id is refused as
 * a likely wrong column rather than allocating a huge output layer. */
#define KS_TABLE_MAX_CLASSES (1 << 24)
/* ks_table_moments' floor of a standard deviation, so a constant feature divides by it
 * without infinities. */
#define KS_TABLE_STD_FLOOR 1e-6f

typedef struct {
  char *path;          /* the file or folder loaded, for messages */
  gsize rows;
  int ndim;            /* of one sample's features */
  gint64 shape[4];     /* CSV: [columns]; IDX images: [h, w, 1], image folders:
                        * [h, w, channels] (NHWC, channels last);
                        * npy: the array's trailing dims ([1] for a 1-D array) */
  gsize features;      /* product of shape */
  float *x;            /* rows * features float32, row-major */
  gboolean regression; /* labels are values (target) rather than classes (y) */
  gint64 *y;           /* rows class ids in [0, classes) when !regression; else NULL */
  float *target;       /* rows values when regression; else NULL */
  gint64 classes;      /* when !regression: max id + 1, or the number of categorical names */
  char **class_names;  /* categorical labels mapped to classes (sorted by strcmp), or an
                        * image folder's class folders; NULL-terminated; NULL when the
                        * labels are numeric */
  char **feature_names; /* CSV with a header: the feature columns' names, NULL-terminated;
                         * else NULL */
} KsTable;

void ks_table_free (KsTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsTable, ks_table_free)

/* CSV as read here: one record a line (LF or CRLF); fields separated by `delimiter`;
 * a field may be quoted with '"' (a doubled "" inside is one quote, the delimiter is
 * literal), but a quoted field cannot span lines; spaces around unquoted fields are
 * trimmed; lines of only white space (anywhere) are skipped, and so is a UTF-8
 * byte-order mark. Every record has the same number of fields, at least 2: one label
 * column, never empty, the others are features, each a finite float32 number.
 *
 * header = -1 (auto): a label given by a name that is not a column index means a header;
 * otherwise the first record is a header when one of its fields other than the label
 * column's is not a number (set header = 1 for a header of numeric names).
 * label: a 0-based column index when it is digits only (a header cell named "4" is
 * picked by its index), else a header name; NULL: the last column. Classification: when every label is a number, each must be a non-negative
 * integer (1 and 1.0 alike) below KS_TABLE_MAX_CLASSES and classes is the largest + 1;
 * when any label is not a number, all labels are names, classes are their sorted set
 * and class_names keeps them. Regression: every label is a finite number. */
typedef enum {
  KS_CSV_MISSING_ERROR = 0, /* a missing cell is an error naming it and [data] missing */
  KS_CSV_MISSING_SKIP,      /* a record with a missing cell is dropped (one warning says how many) */
  KS_CSV_MISSING_MEAN,      /* a missing feature is its column's mean over the file's values */
  KS_CSV_MISSING_ZERO,      /* a missing feature is 0 */
} KsCsvMissing;

typedef struct {
  char delimiter;     /* 0: ',' (or '\t' for a name ending .tsv or .tsv.gz) */
  int header;         /* -1 auto (above), 0 none, 1 yes */
  const char *label;  /* the label column: a 0-based index written as digits, else a header
                       * name; NULL = last */
  gboolean regression;
  KsCsvMissing missing; /* a missing cell: empty, NA, N/A or ?; a missing label is only ever
                         * skipped (SKIP) or an error */
  gboolean features_only; /* no label column: every column is a feature (one is enough),
                           * y and target NULL (rows to score, as ksdist infer reads) */
  const float *fill;    /* KS_CSV_MISSING_MEAN: the value of each feature column's missing
                         * cells (the training rows' means, for held-out rows); NULL: the
                         * column's mean over this file's values */
  gsize n_fill;         /* fill's length: a file of another number of features is refused */
} KsCsvOptions;

/* A cell with no value: empty, NA, N/A or ? (as KsCsvOptions.missing says). */
gboolean ks_table_csv_missing_cell (const char *cell);
/* `options` may be NULL: defaults, header auto, classification. */
KsTable *ks_table_load_csv (const char *path, const KsCsvOptions *options, GError **error);
/* The first record of a CSV file as ks_table_load_csv splits it (delimiter 0: by the
 * name), NULL-terminated, and in *numeric whether every field is a number (else it is a
 * header when header is auto): what a reader needs to tell which columns a file has. */
char **ks_table_csv_first_record (const char *path, char delimiter, gboolean *numeric,
                                  GError **error);

/* features.npy [rows, ...] (up to 4 trailing dims) of float32, float64, uint8, int32 or
 * int64 (made float32),
 * and labels.npy [rows] (or [rows, 1]): int64, int32 or uint8 class ids, or float32 or
 * float64 values when regression (integers are accepted as values too). C order, little
 * endian, format versions 1 to 3; NaN and infinity refused. */
KsTable *ks_table_load_npy (const char *features, const char *labels, gboolean regression,
                            GError **error);

/* IDX as MNIST ships it: `path` a folder holding train-images-idx3-ubyte,
 * train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each possibly
 * with .gz added); `train` picks the pair. Pixels scaled to [0, 1]; shape [h, w, 1]. */
KsTable *ks_table_load_idx (const char *path, gboolean train, GError **error);

/* An image folder as torchvision's ImageFolder lays it out: ROOT/<class>/<image>, one
 * folder per class (at least 2), class ids in strcmp order of the folder names (kept in
 * class_names), rows ordered by class then file name. Files in ROOT itself and hidden
 * entries (names starting with '.') anywhere are skipped; so are files of a class folder
 * whose name is not .png, .jpg or .jpeg (any case), a README.txt, as torchvision skips
 * them (one warning counts them). An image file must hold a whole PNG or JPEG: a
 * sub-folder, a dangling link, a truncated or undecodable image is an error naming it, as
 * is a class folder without images. Symbolic links are followed. The
 * format is known by the first bytes (another format under a .png name is refused), and
 * PNG chunks and JPEG segments must reach their end marker, since gdk-pixbuf would decode
 * a truncated file into a partly grey image; images over 64 megapixels are refused.
 * A missing root, or a folder or file that cannot be read, is KS_CONFIG_ERROR_IO; the
 * rest is KS_COMPUTE_ERROR_INVALID.
 * Each image is decoded by gdk-pixbuf (an error saying so when built without it), resized
 * to height x width (bilinear), made `channels` 1 (the mean of R, G and B) or 3 (grey
 * images repeated; alpha dropped), scaled to [0, 1]; shape [height, width, channels]. */
typedef struct {
  int height, width; /* 1 to KS_IMAGE_FOLDER_MAX_SIDE */
  int channels;      /* 1 or 3 */
} KsImageFolderOptions;

#define KS_IMAGE_FOLDER_MAX_SIDE 4096

/* The image files `paths` (NULL-terminated, at least one), one row each in their order,
 * checked, decoded and made floats exactly as an image folder's; no labels (y NULL). */
KsTable *ks_table_load_images (const char *const *paths, const KsImageFolderOptions *options,
                               GError **error);

KsTable *ks_table_load_image_folder (const char *root, const KsImageFolderOptions *options,
                                     GError **error);

/* A held-out split: rows whose seeded hash of the row index falls below `fraction`
 * (in (0, 1)) go to *test, the rest to *train, both new tables in the original order;
 * the same seed gives the same split. An error, setting neither, when one part would be
 * empty. */
gboolean ks_table_split (const KsTable *t, double fraction, guint64 seed, KsTable **train,
                         KsTable **test, GError **error);

/* Per-feature mean and (population) standard deviation of t's rows into mean and std
 * (t->features each), std floored at KS_TABLE_STD_FLOOR; of no rows, 0 and 1. */
void ks_table_moments (const KsTable *t, float *mean, float *std);
/* x = (x - mean) / std for every row of t, in place: e.g. a test table with the training
 * table's moments. */
void ks_table_standardize (KsTable *t, const float *mean, const float *std);

/* Token files for language models, memory-mapped, read only:
 * - the llm.c shard layout: a header of 256 little-endian int32 (magic 20240520,
 *   version 1, the token count), then that many uint16 tokens;
 * - a plain headerless file of uint16 tokens (nanoGPT's train.bin).
 * A file whose first int32 is the magic is a shard and must be a whole one (version 1,
 * exactly 1024 + 2 x count bytes), else it is an error, never read as plain tokens: a
 * plain file would have to start with the tokens 55432, 308, 1, 0 for this to misfire,
 * and is then refused, not misread. Any other file of an even number of bytes is plain
 * tokens. Gzipped token files are refused (they cannot be mapped).
 * ks_tokens_load_as reads uint16 (width 2, as above) or uint32 (width 4: a plain
 * headerless file of a multiple of 4 bytes; tokenizers of more than 65,536 ids) tokens. */
typedef struct {
  char *path;
  const guint16 *tokens; /* into map; NULL when width is 4 (use ks_tokens_get) */
  gsize n;
  guint32 vocab_hint;    /* the largest token + 1 */
  GMappedFile *map;
  guint width;           /* bytes a token: 2 (uint16) or 4 (uint32) */
  const void *data;      /* the n tokens, into map */
  gsize zeros;           /* tokens that are 0: wider values read as uint16 make many */
} KsTokens;

KsTokens *ks_tokens_load (const char *path, GError **error);
KsTokens *ks_tokens_load_as (const char *path, guint width, GError **error);

/* Token i of t, whatever its width. */
static inline guint32
ks_tokens_get (const KsTokens *t, gsize i)
{
  return t->width == 4 ? ((const guint32 *) t->data)[i] : ((const guint16 *) t->data)[i];
}
void ks_tokens_free (KsTokens *tokens);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (KsTokens, ks_tokens_free)

G_END_DECLS

#endif
