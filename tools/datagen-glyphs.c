/* ksdist datagen glyphs: an Omniglot-like set of handwriting-like characters drawn from
 * the fonts on this machine (fontconfig finds them, FreeType draws them).
 *
 * An alphabet is a Unicode script of the table below; a class is one of its characters.
 * Its images ("drawers") take the fonts that have the whole alphabet in turn, each with
 * its own small random affine map (rotation, shear, scale, shift) and stroke (the grey
 * glyph cut at a random level, thickened or thinned by a pixel), as 105 x 105 black
 * strokes on white, Omniglot's format. Alphabets go whole to train, val or test, as
 * Omniglot's background and evaluation sets do, so test characters are of scripts never
 * seen in training. The same seed and fonts give the same files. */
#include "datagen-fonts.h"

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <math.h>
#include <string.h>

enum { GLYPH_BOX = 62, MAX_CHARS = 40, MIN_FONTS = 2, MAX_FONTS = 12 };

typedef struct {
  const char *name;
  gunichar first, last, step;
} Script;

/* Scripts with letters of one glyph each (no shaping needed), most with a Noto Sans and
 * a Noto Serif face in fonts-noto-core, several weights each. */
static const Script scripts[] = {
  { "Latin", 0x41, 0x5a, 1 },        { "Greek", 0x391, 0x3a9, 1 },
  { "Cyrillic", 0x410, 0x42f, 1 },   { "Armenian", 0x531, 0x556, 1 },
  { "Georgian", 0x10d0, 0x10f0, 1 }, { "Hebrew", 0x5d0, 0x5ea, 1 },
  { "Arabic", 0x627, 0x64a, 1 },     { "Devanagari", 0x905, 0x939, 1 },
  { "Bengali", 0x985, 0x9b9, 1 },    { "Gurmukhi", 0xa15, 0xa39, 1 },
  { "Gujarati", 0xa85, 0xab9, 1 },   { "Oriya", 0xb15, 0xb39, 1 },
  { "Tamil", 0xb85, 0xbb9, 1 },      { "Telugu", 0xc15, 0xc39, 1 },
  { "Kannada", 0xc95, 0xcb9, 1 },    { "Malayalam", 0xd15, 0xd39, 1 },
  { "Sinhala", 0xd9a, 0xdc6, 1 },    { "Thai", 0xe01, 0xe2e, 1 },
  { "Lao", 0xe81, 0xeae, 1 },        { "Tibetan", 0xf40, 0xf6c, 1 },
  { "Myanmar", 0x1000, 0x1020, 1 },  { "Ethiopic", 0x1200, 0x1357, 8 },
  { "Cherokee", 0x13a0, 0x13f4, 1 }, { "Canadian_Syllabics", 0x1401, 0x1448, 1 },
  { "Khmer", 0x1780, 0x17a2, 1 },    { "Tifinagh", 0x2d30, 0x2d65, 1 },
  { "NKo", 0x7ca, 0x7ea, 1 },        { "Thaana", 0x780, 0x7a5, 1 },
  { "Syriac", 0x710, 0x72c, 1 },     { "Ol_Chiki", 0x1c5a, 0x1c77, 1 },
  { "Javanese", 0xa984, 0xa9b2, 1 }, { "Balinese", 0x1b05, 0x1b33, 1 },
  { "Glagolitic", 0x2c00, 0x2c2e, 1 }, { "Coptic", 0x2c80, 0x2cb0, 2 },
  { "Runic", 0x16a0, 0x16ea, 1 },    { "Mongolian", 0x1820, 0x1842, 1 },
  { "Vai", 0xa500, 0xa540, 2 },      { "Yi", 0xa000, 0xa040, 2 },
  { "Bamum", 0xa6a0, 0xa6e5, 1 },    { "Lisu", 0xa4d0, 0xa4f7, 1 },
};

typedef struct {
  const Script *script;
  GArray *fonts; /* Font indices of those that draw every character chosen */
  gunichar chars[MAX_CHARS];
  int n_chars;
} Alphabet;

void
fonts_clear (GArray *fonts)
{
  for (guint i = 0; i < fonts->len; i++)
    {
      Font *f = &g_array_index (fonts, Font, i);
      g_free (f->file);
      FcCharSetDestroy (f->charset);
    }
  g_array_free (fonts, TRUE);
}

static int
compare_fonts (gconstpointer a, gconstpointer b)
{
  const Font *x = a, *y = b;
  int c = strcmp (x->file, y->file);
  return c != 0 ? c : x->index - y->index;
}

/* Every scalable font fontconfig knows, sorted by file and face (a fixed order). */
GArray *
list_fonts (void)
{
  GArray *fonts = g_array_new (FALSE, TRUE, sizeof (Font));
  FcPattern *pattern = FcPatternBuild (NULL, FC_SCALABLE, FcTypeBool, FcTrue, NULL);
  FcObjectSet *os = FcObjectSetBuild (FC_FILE, FC_INDEX, FC_CHARSET, NULL);
  FcFontSet *set = FcFontList (NULL, pattern, os);

  for (int i = 0; set != NULL && i < set->nfont; i++)
    {
      FcChar8 *file;
      FcCharSet *cs;
      int index = 0;
      if (FcPatternGetString (set->fonts[i], FC_FILE, 0, &file) != FcResultMatch
          || FcPatternGetCharSet (set->fonts[i], FC_CHARSET, 0, &cs) != FcResultMatch)
        continue;
      FcPatternGetInteger (set->fonts[i], FC_INDEX, 0, &index);
      Font f = { g_strdup ((const char *) file), index, FcCharSetCopy (cs) };
      g_array_append_val (fonts, f);
    }
  g_array_sort (fonts, compare_fonts);
  if (set != NULL)
    FcFontSetDestroy (set);
  FcObjectSetDestroy (os);
  FcPatternDestroy (pattern);
  return fonts;
}

/* Whether the glyph of c in `face` has ink (not a blank or a missing glyph). */
gboolean
has_ink (FT_Face face, gunichar c)
{
  FT_UInt g = FT_Get_Char_Index (face, c);
  return g != 0 && FT_Load_Glyph (face, g, FT_LOAD_RENDER) == 0
         && face->glyph->bitmap.pixel_mode == FT_PIXEL_MODE_GRAY
         && face->glyph->bitmap.width > 2 && face->glyph->bitmap.rows > 2;
}

/* The alphabet of `script`: the fonts that have at least 3/4 of its letters, and the
 * letters (up to MAX_CHARS) every one of those draws with ink. */
static gboolean
make_alphabet (FT_Library lib, GArray *fonts, const Script *script, Alphabet *a)
{
  int total = 0;
  a->script = script;
  a->fonts = g_array_new (FALSE, FALSE, sizeof (guint));
  a->n_chars = 0;
  for (gunichar c = script->first; c <= script->last; c += script->step)
    total++;
  for (guint i = 0; i < fonts->len && a->fonts->len < MAX_FONTS; i++)
    {
      const Font *f = &g_array_index (fonts, Font, i);
      int have = 0;
      for (gunichar c = script->first; c <= script->last; c += script->step)
        have += FcCharSetHasChar (f->charset, c);
      if (have * 4 >= total * 3)
        g_array_append_val (a->fonts, i);
    }
  if (a->fonts->len < MIN_FONTS)
    return FALSE;
  /* a font FreeType cannot open or scale (a fixed-size one) is left out */
  FT_Face *faces = g_new0 (FT_Face, a->fonts->len);
  guint kept = 0;
  for (guint i = 0; i < a->fonts->len; i++)
    {
      guint index = g_array_index (a->fonts, guint, i);
      const Font *f = &g_array_index (fonts, Font, index);
      if (FT_New_Face (lib, f->file, f->index, &faces[kept]) != 0)
        continue;
      if (FT_Set_Pixel_Sizes (faces[kept], 0, 48) != 0)
        {
          FT_Done_Face (faces[kept]);
          continue;
        }
      g_array_index (a->fonts, guint, kept++) = index;
    }
  g_array_set_size (a->fonts, kept);
  gboolean ok = kept >= MIN_FONTS;
  for (gunichar c = script->first; ok && c <= script->last && a->n_chars < MAX_CHARS;
       c += script->step)
    {
      gboolean all = TRUE;
      for (guint i = 0; i < a->fonts->len && all; i++)
        all = has_ink (faces[i], c);
      if (all)
        a->chars[a->n_chars++] = c;
    }
  for (guint i = 0; i < kept; i++)
    FT_Done_Face (faces[i]);
  g_free (faces);
  return ok && a->n_chars >= 10;
}

/* One drawing of c: the font's glyph scaled to fill GLYPH_BOX, through a random affine
 * map and stroke, on a white CANVAS x CANVAS grey image (0 ink, 255 paper). */
gboolean
draw_glyph (FT_Face face, gunichar c, Rng *r, guint8 *canvas)
{
  FT_UInt g = FT_Get_Char_Index (face, c);
  FT_Bitmap *bm = &face->glyph->bitmap;

  /* the plain glyph's size, to scale it to the box */
  if (FT_Set_Pixel_Sizes (face, 0, 48) != 0 || FT_Load_Glyph (face, g, FT_LOAD_RENDER) != 0
      || bm->width == 0 || bm->rows == 0)
    return FALSE;
  double fit = (double) GLYPH_BOX / MAX (bm->width, bm->rows);
  int px = (int) CLAMP (48 * fit, 8, 400);
  double angle = (rng_uniform (r) - 0.5) * 0.35; /* +-10 degrees */
  double shear = (rng_uniform (r) - 0.5) * 0.4;
  double sx = 0.8 + 0.3 * rng_uniform (r), sy = 0.8 + 0.3 * rng_uniform (r);
  FT_Matrix m = {
    (FT_Fixed) (65536 * sx * cos (angle)), (FT_Fixed) (65536 * (shear - sin (angle)) * sy),
    (FT_Fixed) (65536 * sx * sin (angle)), (FT_Fixed) (65536 * sy * cos (angle)),
  };
  FT_Set_Transform (face, &m, NULL);
  gboolean ok = FT_Set_Pixel_Sizes (face, 0, px) == 0 && FT_Load_Glyph (face, g, FT_LOAD_RENDER)
                == 0;
  FT_Set_Transform (face, NULL, NULL);
  if (!ok || bm->width == 0 || bm->rows == 0 || bm->pixel_mode != FT_PIXEL_MODE_GRAY)
    return FALSE;

  /* centred, shifted by up to 6 pixels; cut at a random level; then maybe a pixel
   * thicker (a minimum over the 4-neighbourhood) or thinner (a maximum) */
  int x0 = (CANVAS - (int) bm->width) / 2 + (int) ((rng_uniform (r) - 0.5) * 12);
  int y0 = (CANVAS - (int) bm->rows) / 2 + (int) ((rng_uniform (r) - 0.5) * 12);
  int level = 60 + (int) (140 * rng_uniform (r));
  double stroke = rng_uniform (r);
  g_autofree guint8 *ink = g_new0 (guint8, CANVAS * CANVAS);
  for (unsigned y = 0; y < bm->rows; y++)
    for (unsigned x = 0; x < bm->width; x++)
      {
        int cx = x0 + (int) x, cy = y0 + (int) y;
        if (cx >= 0 && cx < CANVAS && cy >= 0 && cy < CANVAS)
          ink[cy * CANVAS + cx] = bm->buffer[y * bm->pitch + x] >= level;
      }
  for (int y = 0; y < CANVAS; y++)
    for (int x = 0; x < CANVAS; x++)
      {
        int v = ink[y * CANVAS + x];
        if (stroke < 0.3 || stroke > 0.8)
          {
            int any = v, all = v;
            const int d[4][2] = { { 0, 1 }, { 0, -1 }, { 1, 0 }, { -1, 0 } };
            for (int k = 0; k < 4; k++)
              {
                int nx = x + d[k][0], ny = y + d[k][1];
                int n = nx >= 0 && nx < CANVAS && ny >= 0 && ny < CANVAS
                        ? ink[ny * CANVAS + nx] : 0;
                any |= n, all &= n;
              }
            v = stroke < 0.3 ? any : all;
          }
        canvas[y * CANVAS + x] = v ? 0 : 255;
      }
  return TRUE;
}

static gboolean
write_png (const char *path, const guint8 *grey, GError **error)
{
  g_autoptr (GdkPixbuf) pb = gdk_pixbuf_new (GDK_COLORSPACE_RGB, FALSE, 8, CANVAS, CANVAS);
  guint8 *px = gdk_pixbuf_get_pixels (pb);
  int stride = gdk_pixbuf_get_rowstride (pb);
  for (int y = 0; y < CANVAS; y++)
    for (int x = 0; x < CANVAS; x++)
      memset (px + y * stride + x * 3, grey[y * CANVAS + x], 3);
  return gdk_pixbuf_save (pb, path, "png", error, NULL);
}

int
datagen_glyphs (const char *dir, const DatagenImageOptions *o)
{
  FT_Library lib;
  g_autoptr (GArray) alphabets = g_array_new (FALSE, TRUE, sizeof (Alphabet));
  GArray *fonts;
  Rng r;
  int status = KS_EXIT_RUNTIME, written = 0, chars = 0;

  if (!FcInit () || FT_Init_FreeType (&lib) != 0)
    {
      ks_cli_error ("datagen glyphs: fontconfig or FreeType did not start");
      return KS_EXIT_RUNTIME;
    }
  fonts = list_fonts ();
  for (gsize s = 0; s < G_N_ELEMENTS (scripts); s++)
    {
      Alphabet a;
      if (make_alphabet (lib, fonts, &scripts[s], &a))
        g_array_append_val (alphabets, a);
      else
        g_array_free (a.fonts, TRUE);
    }
  if (alphabets->len < 3)
    {
      ks_cli_error ("datagen glyphs: only %u scripts have %d fonts or more on this machine; "
                    "install more fonts (apt-get install fonts-noto-core)", alphabets->len,
                    MIN_FONTS);
      goto out;
    }
  /* the alphabets in a seeded order; the first ones are kept when --alphabets limits
   * them; then split about 60 / 15 / 25 % (at least one each) */
  rng_seed (&r, o->seed, 7);
  for (guint i = alphabets->len - 1; i > 0; i--)
    {
      guint j = (guint) (rng_uniform (&r) * (i + 1)) % (i + 1);
      Alphabet t = g_array_index (alphabets, Alphabet, i);
      g_array_index (alphabets, Alphabet, i) = g_array_index (alphabets, Alphabet, j);
      g_array_index (alphabets, Alphabet, j) = t;
    }
  guint n = o->alphabets > 0 ? MIN ((guint) o->alphabets, alphabets->len) : alphabets->len;
  if (n < 3)
    {
      ks_cli_error ("datagen glyphs: --alphabets %u; at least 3 (one for each split)", n);
      status = KS_EXIT_USAGE;
      goto out;
    }
  guint n_val = MAX (1, n * 15 / 100), n_test = MAX (1, n / 4), n_train = n - n_val - n_test;
  if (!datagen_prepare_image_dir (dir, o->force))
    goto out;
  for (guint i = 0; i < n; i++)
    {
      Alphabet *a = &g_array_index (alphabets, Alphabet, i);
      const char *split = i < n_train ? "train" : i < n_train + n_val ? "val" : "test";
      g_autofree FT_Face *faces = g_new0 (FT_Face, a->fonts->len);
      for (guint f = 0; f < a->fonts->len; f++)
        {
          const Font *font = &g_array_index (fonts, Font, g_array_index (a->fonts, guint, f));
          if (FT_New_Face (lib, font->file, font->index, &faces[f]) != 0)
            {
              ks_cli_error ("datagen glyphs: FreeType cannot open %s", font->file);
              goto out;
            }
        }
      for (int c = 0; c < a->n_chars && c < (o->classes > 0 ? o->classes : MAX_CHARS); c++)
        {
          g_autofree char *cdir = g_strdup_printf ("%s/%s/%s/character%02d", dir, split,
                                                   a->script->name, c + 1);
          if (g_mkdir_with_parents (cdir, 0755) != 0)
            {
              ks_cli_error ("datagen glyphs: cannot create %s", cdir);
              goto out;
            }
          chars++;
          for (int k = 0; k < o->per_class; k++)
            {
              guint8 canvas[CANVAS * CANVAS];
              g_autofree char *path = g_strdup_printf ("%s/%02d.png", cdir, k + 1);
              g_autoptr (GError) error = NULL;
              /* drawer k: the fonts in turn, each drawing with its own jitter */
              if (!draw_glyph (faces[k % a->fonts->len], a->chars[c], &r, canvas))
                {
                  ks_cli_error ("datagen glyphs: FreeType could not draw U+%04X", a->chars[c]);
                  goto out;
                }
              if (!write_png (path, canvas, &error))
                {
                  ks_cli_error ("datagen glyphs: %s: %s", path, error->message);
                  goto out;
                }
              written++;
            }
        }
      for (guint f = 0; f < a->fonts->len; f++)
        FT_Done_Face (faces[f]);
    }
  printf ("glyphs: %d characters of %u scripts (%u train, %u val, %u test), %d images in %s\n",
          chars, n, n_train, n_val, n_test, written, dir);
  status = KS_EXIT_OK;
out:
  for (guint i = 0; i < alphabets->len; i++)
    g_array_free (g_array_index (alphabets, Alphabet, i).fonts, TRUE);
  fonts_clear (fonts);
  FT_Done_FreeType (lib);
  return status;
}
