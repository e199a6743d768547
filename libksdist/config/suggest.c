/* "Did you mean": the nearest candidate by edit distance, for unknown names; and sorting. */
#include "ks-private.h"

#include <string.h>

char *
ks_printable (const char *text, gsize max)
{
  gsize len = strlen (text);
  GString *out = g_string_new (NULL);
  const char *p = text, *end = text + MIN (len, max);

  while (p < end)
    {
      gunichar c = g_utf8_get_char_validated (p, end - p);
      if (c == (gunichar) -1 || c == (gunichar) -2) /* not UTF-8: the byte itself */
        g_string_append_printf (out, "\\x%02x", (guchar) *p++);
      else
        {
          if (g_unichar_iscntrl (c)) /* C0, DEL and C1: a terminal would obey them */
            g_string_append_printf (out, c < 0x100 ? "\\x%02x" : "\\u%04x", c);
          else
            g_string_append_unichar (out, c);
          p = g_utf8_next_char (p);
        }
    }
  if (len > max)
    g_string_append_printf (out, "... (%" G_GSIZE_FORMAT " bytes)", len);
  return g_string_free (out, FALSE);
}

char *
ks_message_shorten (const char *message)
{
  enum { LONGEST = 256, KEPT = 200 };
  GString *out = g_string_sized_new (MIN (strlen (message), 4096));

  for (const char *p = message; *p != '\0';)
    {
      gsize run = strcspn (p, " \t\n");
      if (run > LONGEST)
        {
          /* whole UTF-8 characters only */
          const char *cut = g_utf8_find_prev_char (p, p + KEPT + 1);
          if (cut == NULL || cut <= p)
            cut = p + KEPT;
          g_string_append_len (out, p, cut - p);
          g_string_append_printf (out, "... (%" G_GSIZE_FORMAT " bytes)", run);
        }
      else
        g_string_append_len (out, p, run);
      p += run;
      gsize blanks = strspn (p, " \t\n");
      g_string_append_len (out, p, blanks);
      p += blanks;
    }
  return g_string_free (out, FALSE);
}

static gsize
edit_distance (const char *a, const char *b)
{
  gsize la = strlen (a), lb = strlen (b);
  g_autofree gsize *row = g_new (gsize, lb + 1);

  for (gsize j = 0; j <= lb; j++)
    row[j] = j;
  for (gsize i = 1; i <= la; i++)
    {
      gsize diag = row[0];
      row[0] = i;
      for (gsize j = 1; j <= lb; j++)
        {
          gsize up = row[j];
          gsize cost = g_ascii_tolower (a[i - 1]) == g_ascii_tolower (b[j - 1]) ? 0 : 1;
          row[j] = MIN (MIN (row[j] + 1, row[j - 1] + 1), diag + cost);
          diag = up;
        }
    }
  return row[lb];
}

const char *
ks_suggest (const char *word, const char *const *candidates, gsize n)
{
  /* Near enough: a third of the word, at least 2 edits, so "theads" finds "threads"
   * but "x" does not find "mode". */
  gsize limit = MAX (2, strlen (word) / 3);
  const char *best = NULL;
  gsize best_distance = G_MAXSIZE;

  for (gsize i = 0; i < n; i++)
    {
      gsize d = edit_distance (word, candidates[i]);
      if (d < best_distance)
        {
          best_distance = d;
          best = candidates[i];
        }
    }
  return best_distance <= limit ? best : NULL;
}

int
ks_strcmp_indirect (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}
