/* The C part: each rank's weight, which main.cpp sums over the ranks with MPI_Reduce. */
int rank_weight(int rank) { return rank * rank + 1; }
