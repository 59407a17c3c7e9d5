package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/corralhq/corral/images"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build and list corral's sandbox images",
		Long: `image builds corral's default sandbox image, ` + images.Default + ` (Debian
bookworm with bash, git, curl, make, gcc, python3, ripgrep, jq and the usual tools),
and lists the images corral built. The sandbox runs any Linux image (--image); this
one is the default.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newImageBuildCmd(), newImageLsCmd())
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	var (
		name  string
		base  string
		force bool
		check bool
		// --agent
		agentImage bool
		binary     string
	)
	cmd := &cobra.Command{
		Use:   "build [flags]",
		Short: "Build the default sandbox image, showing docker build's progress",
		Long: `build builds the default sandbox image with docker build from the Dockerfile
carried in this binary, and shows docker build's progress. It does nothing when
the image exists and was built from the same Dockerfile (the image's
corral.image.hash label says so), unless --force.

The base image (debian:bookworm-slim unless --base) is used from the local engine
or pulled. Where it cannot be pulled (no registry) the base is bootstrapped with
debootstrap from Debian's mirror and imported as ` + images.Base + `, which later
builds reuse: that needs root (or sudo) and the debootstrap package. Needs bash
and the docker CLI.`,
		Example: `  corral image build
  corral image build --force
  corral image build --name my/dev:latest --base debian:bookworm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if check {
				ok, err := images.UpToDate(cmd.Context(), name, base)
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s is missing or out of date: corral image build builds it\n", name)
					return exitError(1)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s is up to date\n", name)
				return nil
			}
			if agentImage {
				if name == images.Default {
					name = images.DefaultAgent
				}
				if err := images.BuildAgent(cmd.Context(), images.AgentOptions{Name: name, Binary: binary, Stderr: cmd.ErrOrStderr()}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "built %s\n", name)
				return nil
			}
			return images.Build(cmd.Context(), images.BuildOptions{
				Name:   name,
				Base:   base,
				Force:  force,
				Stdin:  cmd.InOrStdin(),
				Stdout: cmd.OutOrStdout(),
				Stderr: cmd.ErrOrStderr(),
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", images.Default, "tag of the image to build; the sandbox uses "+images.Default+" unless given --image")
	fl.StringVar(&base, "base", "", "base image to build FROM (default debian:bookworm-slim, bootstrapped with debootstrap when it cannot be pulled); any other must be local or pullable")
	fl.BoolVar(&force, "force", false, "rebuild even if the image is up to date, without docker's layer cache, trying to pull a newer base first")
	fl.BoolVar(&check, "check", false, "build nothing: exit 0 if the image is up to date, 1 if it is missing or out of date")
	fl.BoolVar(&agentImage, "agent", false, "build the agent image of the Kubernetes backend instead ("+images.DefaultAgent+" unless --name): this corral's static binary at /corral, FROM scratch")
	fl.StringVar(&binary, "binary", "", "with --agent, the static corral-agent (or corral) binary to put in the image (default: corral-agent beside this binary, else this one, which must be static)")
	cmd.MarkFlagsMutuallyExclusive("check", "force")
	cmd.MarkFlagsMutuallyExclusive("check", "agent")
	return cmd
}

func newImageLsCmd() *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "List the images corral built (sandbox images and bootstrapped bases)",
		Long: `ls lists the images on the Docker engine that corral image build (or make image)
made: sandbox images and the bases it bootstrapped, those labelled
` + images.RoleLabel + `. It needs the docker CLI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := images.List(cmd.Context())
			if err != nil {
				return err
			}
			if quiet {
				for _, im := range list {
					fmt.Fprintln(cmd.OutOrStdout(), im.Name)
				}
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "IMAGE\tROLE\tVERSION\tID\tCREATED\tSIZE")
			for _, im := range list {
				version := im.Version
				if version == "" {
					version = "-"
				}
				id := strings.TrimPrefix(im.ID, "sha256:")
				id = id[:min(12, len(id))]
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", im.Name, im.Role, version, id,
					im.Created.Local().Format("2006-01-02 15:04"), units.HumanSize(float64(im.Size)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the images' names (REPOSITORY:TAG), one a line")
	return cmd
}
