! A Fortran MPI program built with orrery-mpif90 (tests/native/test_mpif90.py), 2 ranks: started
! with MPI_Init_thread, both meet at a barrier, then rank 1 aborts the job with error code 7.
program abort
  use mpi
  implicit none
  integer :: ierr, provided, rank
  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 1) call MPI_Abort(MPI_COMM_WORLD, 7, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program abort
