#ifndef GEOM_H
#define GEOM_H
double hypotenuse(double a, double b);
#endif
