#include <ctype.h>
#include <stdio.h>

/* Reads one word from stdin into a local buffer; returns its length, or -1 at the end. */
static int read_word(void) {
  char word[16];
  int n = 0, c;
  while ((c = getchar()) != EOF && isspace(c)) {
  }
  if (c == EOF) return -1;
  do {
    if (n < 1000000) word[n] = (char)c;
    n++;
  } while ((c = getchar()) != EOF && !isspace(c));
  return word[0] ? n : 0;
}

int main(void) {
  int longest = 0, n;
  while ((n = read_word()) >= 0) {
    if (n > longest) longest = n;
  }
  printf("longest %d\n", longest);
  return 0;
}
