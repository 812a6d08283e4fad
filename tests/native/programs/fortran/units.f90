! Fortran I/O on every rank, as a Fortran program's own runtime keeps it (tests/native/test_mpif90.py):
! rank 0 writes an input deck of the numbers 1 to 100 (unit 10); after a barrier every rank reads
! it on unit 11, the same number on every rank, with a barrier after every tenth line (the other
! ranks read meanwhile), and prints the sum; each rank then writes "rank R sum S" to a file of its
! own on unit 12, open across a barrier. Under a real MPI each process has its own unit table: every
! rank reads all 100 lines (sum 5050) and writes its own file.
program units
  implicit none
  include 'mpif.h'
  integer :: rank, ierr, i, value, total
  character(len=16) :: name
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  if (rank == 0) then
    open(unit=10, file='deck.txt', status='replace', action='write')
    do i = 1, 100
      write(10, '(I0)') i
    end do
    close(10)
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  open(unit=11, file='deck.txt', status='old', action='read')
  total = 0
  do i = 1, 100
    read(11, *) value
    total = total + value
    if (mod(i, 10) == 0) call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end do
  close(11)
  write(name, '(A,I0,A)') 'rank', rank, '.txt'
  open(unit=12, file=name, status='replace', action='write')
  write(12, '(A,I0,A,I0)') 'rank ', rank, ' sum ', total
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  close(12)
  print '(A,I0,A,I0)', 'rank ', rank, ' read ', total
  call MPI_Finalize(ierr)
end program units
