! A Fortran MPI program built with orrery-mpif90 (tests/native/test_mpif90.py), 2 ranks: rank 0
! sends 100 doubles of 1.5 to rank 1 (800 bytes), then both sum rank + 1 with MPI_Allreduce.
program ring
  implicit none
  include 'mpif.h'
  integer :: rank, nranks, ierr, mine, total
  integer :: status(MPI_STATUS_SIZE)
  double precision :: buf(100)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  buf = 0
  if (rank == 0) then
    buf = 1.5
    call MPI_Send(buf, 100, MPI_DOUBLE_PRECISION, 1, 7, MPI_COMM_WORLD, ierr)
  else if (rank == 1) then
    call MPI_Recv(buf, 100, MPI_DOUBLE_PRECISION, 0, 7, MPI_COMM_WORLD, status, ierr)
  end if
  mine = rank + 1
  call MPI_Allreduce(mine, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  print '(A,I0,A,I0,A,I0,A,F4.2)', 'rank ', rank, ' of ', nranks, ' total ', total, ' received ', buf(100)
  call MPI_Finalize(ierr)
end program ring
