#include <math.h>
#include "geom.h"

double hypotenuse(double a, double b) { return sqrt(a * a + b * b); }
