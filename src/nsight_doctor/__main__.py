from nsight_doctor.cli import main

main()
